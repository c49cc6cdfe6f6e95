/* alone.cu */
extern "C" tk_status tk_cuda_alone(const tk_call *call, void *stream)
{
	return toy_launch(call, stream, 7);
}
