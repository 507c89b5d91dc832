# PyTorch on the GPU through whatever libcuda.so.1 the loader finds: init, matmul (cuBLAS), a
# convolution (cuDNN), a small CNN's forward, backward and optimizer step; prints times and a loss.
import time
t0 = time.time()
import torch
t1 = time.time()
x = torch.randn(256, 256, device="cuda")
torch.cuda.synchronize()
t2 = time.time()
y = x @ x
conv = torch.nn.Conv2d(3, 8, 3).cuda()
z = conv(torch.randn(4, 3, 32, 32, device="cuda"))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 30 * 30, 10)).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
inp = torch.randn(16, 3, 32, 32, device="cuda")
tgt = torch.randint(0, 10, (16,), device="cuda")
loss = torch.nn.functional.cross_entropy(net(inp), tgt)
loss.backward()
opt.step()
torch.cuda.synchronize()
t3 = time.time()
print(f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}")
print(f"import {t1 - t0:.3f} s, first tensor {t2 - t1:.3f} s, work {t3 - t2:.3f} s, loss {loss.item():.6f}, y {y.sum().item():.3f}, z {z.sum().item():.3f}")
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line and any(k in line for k in ("cuda", "cublas", "cudnn", "nvidia", "nvrtc", "nvJit", "cufft", "curand", "nccl", "nvml"))})
print("loaded:", " ".join(libs))
