# memprobe --torch start-up hook. memprobe puts this directory first on the
# child's PYTHONPATH; Python imports `sitecustomize` at start-up. It never
# imports torch itself. Once the program has imported torch:
#
# - a daemon thread reports the caching allocator's figures per device to
#   memprobe through the named pipe in MEMPROBE_TORCH_FIFO, one JSON line
#   (shorter than PIPE_BUF, so lines of several processes never interleave)
#   every MEMPROBE_TORCH_INTERVAL seconds (after CUDA is initialised), and
#   once more at exit;
# - every training step is reported at its end: a step is a step() of the
#   first optimizer that steps (torch's global optimizer hooks), or, in a
#   process where no optimizer steps, a backward() (torch.autograd.backward
#   wrapped), or, where neither happens, a top-level module forward (global
#   module hooks, removed once a backward or optimizer step is seen). At each
#   step's end it takes the time, the allocator's peak within the step
#   (CUDA: read, then reset; one torch.cuda.synchronize() first, so the time
#   includes the step's GPU work: MEMPROBE_TORCH_SYNC=0 leaves it out) and
#   what is left allocated, and the process's RSS and its high-water mark
#   since the last step (reset through /proc/self/clear_refs where allowed).
#   Resetting the allocator's peak means the script's own
#   torch.cuda.max_memory_allocated() reads the peak since the last step:
#   MEMPROBE_TORCH_RESET_PEAK=0 (`memprobe run --keep-peak-stats`) leaves
#   the counters alone, and each step's peak is then the peak so far.
import os as _os


def _memprobe_hook():
    import atexit
    import json
    import sys
    import threading
    import time

    path = _os.environ.get("MEMPROBE_TORCH_FIFO")
    if not path:
        return
    try:
        interval = max(float(_os.environ.get("MEMPROBE_TORCH_INTERVAL", "0.01")), 0.001)
    except ValueError:
        interval = 0.01
    try:
        fd = _os.open(path, _os.O_WRONLY | _os.O_NONBLOCK)
    except OSError:
        return
    pid = _os.getpid()
    lock = threading.Lock()

    def report():
        torch = sys.modules.get("torch")
        msg = {"pid": pid, "t": time.time(), "torch": None, "cuda": False, "devices": []}
        if torch is not None:
            msg["torch"] = getattr(torch, "__version__", None)
            try:
                cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
            except Exception:
                cuda = False
            msg["cuda"] = bool(cuda)
            if cuda:
                for d in range(torch.cuda.device_count()):
                    try:
                        msg["devices"].append([
                            d,
                            torch.cuda.memory_allocated(d),
                            torch.cuda.memory_reserved(d),
                            torch.cuda.max_memory_allocated(d),
                            torch.cuda.max_memory_reserved(d),
                        ])
                    except Exception:
                        pass
        line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        if len(line) < 4096:
            with lock:
                try:
                    _os.write(fd, line)
                except OSError:
                    pass  # memprobe is gone or the pipe is full: drop the sample

    def loop():
        while True:
            report()
            time.sleep(interval)

    threading.Thread(target=loop, name="memprobe-torch-hook", daemon=True).start()
    atexit.register(report)
    _memprobe_steps(fd, lock)


def _memprobe_steps(fd, lock):
    import importlib.machinery
    import json
    import sys
    import threading
    import time

    sync = _os.environ.get("MEMPROBE_TORCH_SYNC", "1") != "0"
    reset_peak = _os.environ.get("MEMPROBE_TORCH_RESET_PEAK", "1") != "0"
    levels = {"forward": 1, "backward": 2, "optimizer": 3}
    state = {"level": 0, "n": 0, "last": None, "first_opt": None, "handles": [], "clear_refs": True}
    local = threading.local()

    def host_memory():
        rss = hwm = None
        try:
            with open("/proc/self/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmRSS:"):
                        rss = int(line.split()[1]) * 1024
                    elif line.startswith(b"VmHWM:"):
                        hwm = int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        reset = False
        if state["clear_refs"]:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
                reset = True
            except OSError:
                state["clear_refs"] = False
        return rss, hwm, reset

    def boundary(kind):
        level = levels[kind]
        if level < state["level"]:
            return
        if level > state["level"]:
            state["level"], state["n"], state["last"] = level, 0, None
            if level > 1:
                for h in state["handles"]:
                    h.remove()
                state["handles"] = []
        torch = sys.modules.get("torch")
        cuda = []
        try:
            if torch is not None and torch.cuda.is_initialized():
                if sync:
                    torch.cuda.synchronize()
                for d in range(torch.cuda.device_count()):
                    peak = torch.cuda.max_memory_allocated(d)
                    if peak == 0:
                        continue
                    cuda.append([d, peak, torch.cuda.memory_allocated(d), torch.cuda.max_memory_reserved(d)])
                    if reset_peak:
                        torch.cuda.reset_peak_memory_stats(d)
        except Exception:
            cuda = []
        now = time.perf_counter()
        rss, hwm, reset = host_memory()
        last = state["last"]
        step = {
            "kind": kind,
            "n": state["n"],
            "dt": None if last is None else now - last,
            "cuda": cuda,
            "rss": rss,
            "hwm": hwm,
            "hwm_reset": reset,
            "cuda_peak_reset": reset_peak,
        }
        state["last"] = now
        state["n"] += 1
        line = (json.dumps({"pid": _os.getpid(), "t": time.time(), "step": step}, separators=(",", ":")) + "\n").encode()
        if len(line) < 4096:
            with lock:
                try:
                    _os.write(fd, line)
                except OSError:
                    pass

    def guarded(kind):
        try:
            boundary(kind)
        except Exception:
            pass

    def install(torch):
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            def on_step(opt, args, kwargs):
                if state["first_opt"] is None:
                    state["first_opt"] = id(opt)
                if id(opt) == state["first_opt"]:
                    guarded("optimizer")

            register_optimizer_step_post_hook(on_step)
        except Exception:
            pass
        try:
            inner = torch.autograd.backward

            def backward(*args, **kwargs):
                out = inner(*args, **kwargs)
                if state["level"] <= 2:
                    guarded("backward")
                return out

            backward.__wrapped__ = inner
            torch.autograd.backward = backward
        except Exception:
            pass
        try:
            from torch.nn.modules import module as m

            def pre(mod, args):
                local.depth = getattr(local, "depth", 0) + 1

            def post(mod, args, out):
                local.depth = max(getattr(local, "depth", 1) - 1, 0)
                if local.depth == 0 and state["level"] <= 1:
                    guarded("forward")

            state["handles"] = [
                m.register_module_forward_pre_hook(pre),
                m.register_module_forward_hook(post, always_call=True),
            ]
        except Exception:
            pass

    class Finder:
        """Runs `install` once the `torch` package has finished importing."""

        done = False

        def find_spec(self, name, path=None, target=None):
            if name != "torch" or self.done:
                return None
            self.done = True
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def run(module):
                exec_module(module)
                try:
                    install(module)
                except Exception:
                    pass

            spec.loader.exec_module = run
            return spec

    if "torch" in sys.modules:
        install(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, Finder())


try:
    _memprobe_hook()
except Exception:
    pass

# Chain to the sitecustomize this one shadows, if any.
def _memprobe_chain():
    import importlib.machinery
    import importlib.util
    import sys

    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _memprobe_chain()
except Exception:
    pass
