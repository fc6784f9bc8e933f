#include "hark_pocketsphinx.h"
#include <stdio.h>

ps_decoder_t *hark_ps_decoder_create(const char *acoustic_model_dir,
                                     const char *dictionary_path,
                                     float sample_rate)
{
    char rate[32];
    snprintf(rate, sizeof rate, "%.0f", sample_rate);
    cmd_ln_t *config = cmd_ln_init(NULL, ps_args(), TRUE,
                                   "-hmm", acoustic_model_dir,
                                   "-dict", dictionary_path,
                                   "-samprate", rate,
                                   "-logfn", "/dev/null",
                                   NULL);
    if (config == NULL)
        return NULL;
    ps_decoder_t *decoder = ps_init(config);
    cmd_ln_free_r(config);
    return decoder;
}
