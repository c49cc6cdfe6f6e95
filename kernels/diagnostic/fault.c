/*
 * fault.c - CPU reference of the diagnostic `fault` op: it stands for a
 * device fault (TK_ERR_FAULT, which the CPU backend treats as a lost
 * device) or, with sticky false, for a launch the device refuses.
 */
#include "tk_internal.h"

tk_status tk_cpu_fault(const tk_call *call)
{
	return tk_param_num(call, 0, 1.0) != 0.0 ? TK_ERR_FAULT : TK_ERR_LAUNCH;
}
