/* gen.c - defined by a macro from a header. */
#include "check_ops_gen.h"

TOY_CPU(generated, 3)
