#include <libspeechd.h>
