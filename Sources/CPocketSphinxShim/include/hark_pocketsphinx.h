#ifndef HARK_POCKETSPHINX_H
#define HARK_POCKETSPHINX_H

#include <pocketsphinx.h>

/// Creates a decoder for an acoustic model and a pronunciation dictionary, with
/// PocketSphinx's own logging silenced. `cmd_ln_init` is variadic, which Swift cannot call.
/// Returns NULL when the model cannot be loaded.
ps_decoder_t *hark_ps_decoder_create(const char *acoustic_model_dir,
                                     const char *dictionary_path,
                                     float sample_rate);

#endif
