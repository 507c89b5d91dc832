# PyTorch through whatever libcuda.so.1 the loader finds (scripts/gpu-libraries runs it natively and
# through GPUsockets and compares): import, tensor ops, matmul (cuBLAS), a convolution (cuDNN), a
# small CNN's forward, backward and SGD steps (seeded), a CUDA graph (capture and replay), and
# torch.compile of one function. Prints one JSON object; each part is run on its own, so one failing
# part is reported without hiding the others.
import json
import sys
import time
import traceback

result = {}
t0 = time.time()
import torch  # noqa: E402

result["import_s"] = round(time.time() - t0, 3)
result["versions"] = f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}"
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def part(name):
    def wrap(fn):
        start = time.time()
        try:
            result[name] = fn()
        except Exception as e:  # report and go on
            result[name] = {"error": f"{type(e).__name__}: {e}"}
            traceback.print_exc(file=sys.stderr)
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        result[name + "_s"] = round(time.time() - start, 3)
        return fn
    return wrap


@part("device")
def _():
    t = time.time()
    x = torch.ones(4, device="cuda")
    torch.cuda.synchronize()
    return {"count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0), "first_tensor_s": round(time.time() - t, 3),
            "sum": x.sum().item()}


@part("tensor_ops")
def _():
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randint(-8, 9, (1000, 1000), device="cuda", generator=g).float()
    b = (a * 2 + 1).relu().sum(dim=0)
    return {"sum": b.sum().item(), "max": b.max().item(), "cumsum_last": torch.cumsum(b, 0)[-1].item()}


@part("matmul")
def _():
    g = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randint(-8, 9, (512, 384), device="cuda", generator=g).float()
    b = torch.randint(-8, 9, (384, 256), device="cuda", generator=g).float()
    c = a @ b
    exact = torch.equal(c.cpu(), a.cpu() @ b.cpu())
    return {"sum": c.sum().item(), "equals_cpu": exact}


@part("conv")
def _():
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1).cuda()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    y = conv(x)
    ref = torch.nn.functional.conv2d(x.cpu(), conv.weight.detach().cpu(), conv.bias.detach().cpu(), padding=1)
    return {"sum": y.sum().item(), "max_err_vs_cpu": (y.cpu() - ref).abs().max().item()}


@part("train")
def _():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 15 * 15, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    inp = torch.randn(16, 3, 32, 32, device="cuda")
    tgt = torch.randint(0, 10, (16,), device="cuda")
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(inp), tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses}


@part("cuda_graph")
def _():
    static_in = torch.zeros(1 << 16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            static_out = (static_in * 2 + 1).sin()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = (static_in * 2 + 1).sin()
    outs = []
    for v in (0.0, 1.0, 2.5):
        static_in.fill_(v)
        g.replay()
        outs.append(static_out.sum().item())
    return {"replays": outs}


@part("compile")
def _():
    def f(x, y):
        return torch.sin(x) * torch.cos(y) + x * y

    cf = torch.compile(f)
    g = torch.Generator(device="cuda").manual_seed(4)
    x = torch.rand(4096, device="cuda", generator=g)
    y = torch.rand(4096, device="cuda", generator=g)
    out = cf(x, y)
    return {"max_err_vs_eager": (out - f(x, y)).abs().max().item(), "sum": out.sum().item()}


result["total_s"] = round(time.time() - t0, 3)
print(json.dumps(result, sort_keys=True))
