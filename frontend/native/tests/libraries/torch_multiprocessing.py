"""torch.multiprocessing sharing a CUDA tensor between two processes (issue 24), for scripts/gpu-programs.

The parent makes a CUDA tensor and passes it to a spawned child through a torch.multiprocessing queue,
which shares its storage with CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle, and an IPC event
that keeps the memory alive while the child uses it); the child adds 1 in place and sends a tensor of
its own back, which the parent reads through IPC the other way. Natively and through GPUsockets (both
processes use our libcuda.so.1, the child inheriting the environment) the output must be the same,
line for line; exit 0 with PASS when every value is right.
"""
import sys

import torch
import torch.multiprocessing as mp


def child(q_in, q_out, done):
    t = q_in.get(timeout=120)
    t.add_(1)  # in place, in the parent's memory
    torch.cuda.synchronize()
    back = torch.arange(8, device="cuda", dtype=torch.float32) * 3
    q_out.put(back)
    done.wait(120)  # torch's rule: the sender keeps a shared tensor alive until the receiver is done with it


def main():
    mp.set_start_method("spawn")
    t = torch.arange(1024, device="cuda", dtype=torch.float32)
    q_in, q_out, done = mp.Queue(), mp.Queue(), mp.Event()
    p = mp.Process(target=child, args=(q_in, q_out, done))
    p.start()
    q_in.put(t)
    back = q_out.get(timeout=120)
    got_back = back.tolist()
    del back
    torch.cuda.synchronize()
    total = float(t.sum())
    done.set()
    p.join(120)
    print("tensor from the child:", got_back)
    print("sum after the child's add:", total)
    print("child exit:", p.exitcode)
    ok = total == sum(range(1024)) + 1024 and got_back == [3.0 * i for i in range(8)] and p.exitcode == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
