// dq_host: reads a row of `cols` elements of ggml type `type` from stdin and
// writes dq_elem of each element as little-endian float32 to stdout.
#define WEFT_HOST_TEST 1
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "../dequant.cuh"

int main(int argc, char **argv) {
	if (argc != 3) return 2;
	int type = atoi(argv[1]), cols = atoi(argv[2]);
	std::vector<uint8_t> in;
	int c;
	while ((c = getchar()) != EOF) in.push_back((uint8_t)c);
	std::vector<float> out(cols);
	for (int i = 0; i < cols; i++) out[i] = dq_elem(in.data(), type, i);
	fwrite(out.data(), 4, cols, stdout);
	return 0;
}
