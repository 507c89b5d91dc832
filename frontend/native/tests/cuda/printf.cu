// printf's kernel: device printf from one warp (a GPU prints the printf calls of one warp's lanes in
// lane order, so the text is deterministic; several warps or blocks would not be). Lane 0 prints a
// line without arguments, then after __syncwarp lanes 1, 5, ..., 29 print one line each with the
// conversions %d %u %f %e %s %x %lld %c and a width and precision (%5.2f). Each printf's return
// value (the number of arguments it consumed: 0 and 10) goes to rets, -1 where a lane did not print.
#include <stdio.h>

extern "C" __global__ void print_lanes(int *rets) {
    int lane = threadIdx.x;
    int header = -1, line = -1;
    if (lane == 0) {
        header = printf("print_lanes: one warp, lanes 1, 5, ..., 29 print\n");
    }
    __syncwarp();
    if (lane % 4 == 1) {
        line = printf("lane %2d: d=%d u=%u f=%f e=%e s=%s x=%x lld=%lld c=%c w=[%5.2f]\n", lane, lane * lane - 50,
                      3000000000u + lane, lane * 0.5f + 0.125f, lane * 1234.5e6, lane < 16 ? "low" : "high",
                      0xbeef0000u + lane, (long long) lane * -1000000007LL, 'A' + lane, lane / 3.0f);
    }
    rets[lane] = line;
    if (lane == 0) {
        rets[32] = header;
    }
}
