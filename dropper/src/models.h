/* The loss models, one file each in models/ (each: its kernel verdict `<file>_drop`, and for the loader
 * `<file>_model()`, its name, parameters, table and sequential verdicts), registered here once: an
 * #include and a line of FD_MODELS. The kernel program dispatches on cfg.model through FD_MODELS, the
 * loader looks models up by name or id (model.c). Must stay bit-identical to fecbench/dropper/models/. */
#ifndef FECDROP_MODELS_H
#define FECDROP_MODELS_H

#include "models/none.h"
#include "models/uniform.h"
#include "models/gilbert_elliott.h"
#include "models/trace.h"

/* X(ID, file): cfg.model = FD_MODEL_<ID> (in this order), the functions are named after the file. */
#define FD_MODELS(X) X(NONE, none) X(UNIFORM, uniform) X(GE, gilbert_elliott) X(TRACE, trace)

#define FD_MODEL_ID(ID, file) FD_MODEL_##ID,
enum fd_model_id { FD_MODELS(FD_MODEL_ID) FD_MODEL_COUNT };
#undef FD_MODEL_ID

#endif
