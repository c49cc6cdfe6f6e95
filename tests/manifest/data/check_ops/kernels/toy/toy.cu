/* toy.cu - one launcher written out, one through two macros, one only declared. */
#define TOY_CUDA_INNER(name, k)                                                \
	extern "C" tk_status tk_cuda_##name(const tk_call *call, void *stream) \
	{                                                                      \
		return toy_launch(call, stream, k);                            \
	}
#define TOY_CUDA(op) TOY_CUDA_INNER(op, 4)

extern "C" tk_status tk_cuda_complete(const tk_call *call, void *stream)
{
	return toy_launch(call, stream, 0);
}

TOY_CUDA(generated)

extern "C" tk_status tk_cuda_broken(const tk_call *call, void *stream);
