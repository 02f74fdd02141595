# memprobe --torch start-up hook. memprobe puts this directory first on the
# child's PYTHONPATH; Python imports `sitecustomize` at start-up. It never
# imports torch itself: once the program has imported torch and initialised
# CUDA, a daemon thread reports the caching allocator's figures per device
# to memprobe through the named pipe in MEMPROBE_TORCH_FIFO, one JSON line
# (shorter than PIPE_BUF, so lines of several processes never interleave)
# every MEMPROBE_TORCH_INTERVAL seconds, and once more at exit.
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
