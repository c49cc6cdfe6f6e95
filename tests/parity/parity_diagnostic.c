/*
 * parity_diagnostic.c - the diagnostic ops (spin) on the GPU against their
 * CPU references, every manifest workload (parity.h); the manifest serves
 * them here as tileopsd does with diagnostic_ops = on.
 */
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(diagnostic)
