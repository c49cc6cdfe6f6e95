/*
 * parity_moe.c - the moe family on the GPU against its CPU references: every
 * manifest workload, scaled (parity_rules.c keeps the grouped GEMMs' P = T*k +
 * E*(block_m - 1)), with routing from tools/workload's rules: random distinct
 * experts per token with every 16th outside the layer for moe_align, one
 * consistent moe_align layout with empty experts for the GEMMs. Route and
 * align compare exactly.
 */
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(moe)
