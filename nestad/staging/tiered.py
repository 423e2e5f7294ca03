"""``stage(f, backend="tiered")``: the Python backend's code from the first call, numba's
machine code once a separate process has compiled the same program into the disk cache.

numba's cold compile of a staged program takes seconds to minutes (its typing and LLVM
run in the compiling process); the Python backend's code is ready in milliseconds but
slower per call.  A tiered program runs the Python code at once and hands the pickled
program to a child process (``python -c`` of ``_child`` below), which compiles it with
numba into ``cache_dir()``; the first call after the child is done loads that machine
code from disk (numba was imported and readied by a thread meanwhile; the switch never
compiles); the next ``TRIAL_CALLS`` calls take turns on the two tiers, timed, and the
faster one serves every call after them (numba's, nearly always).  The numbers are the numba backend's, which are the
Python backend's but for a few ulp in numba's array ``exp``, ``log``... (notes/staging.md,
"Tiers").

The child dies with its parent: it reads the end of its stdin, a pipe only the parent
(and the parent's forks) hold open, and exits when it closes.  The parent reaps it from a
daemon thread (no zombie) and kills what is still running at exit.  One child per
program, started at its first compile; a process forked while a child runs keeps the
Python tier for that program (the child is its parent's), with no warning.  Where numba
is missing or cannot compile the program, the program stays on the Python tier with the
numba backend's warning.
"""
import atexit
import hashlib
import importlib.util
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time
import warnings

from . import numba_backend
from .numba_backend import NumbaFallbackWarning, cache_dir, compile_numba

_RUNNING = set()        # the jobs whose child may still run, in this process
_LOCK = threading.Lock()
_LOADING = threading.Lock()     # held while this process imports and readies numba
_JOBS = {}              # hash of (program, directory) pickled -> its job, in this process
_KEEP = 256             # jobs remembered (the oldest forgotten first)


def _settings():
    """The numba backend's knobs as this process has them (the child compiles with them,
    so that its code is the one the switch looks up)."""
    return {name: getattr(numba_backend, name) for name in _KNOBS}


_KNOBS = ('OPT_LEVEL', 'PIECE_LINES', 'VECTORIZE_FROM')


def job_for(program, directory):
    """The job compiling ``program`` into ``directory``: a new one, or the one another
    staged function of this process started for the same program (one child per
    program); a finished job without a child where the program does not pickle."""
    try:
        payload = pickle.dumps((program, directory, _settings()), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:              # (a primitive defined in a function has no name)
        job = Job.__new__(Job)
        job.directory, job.pid, job.started, job.finished = directory, os.getpid(), None, None
        job.result = ('python', f"the tiered backend cannot pass the program to its compiling "
                                f"process ({type(e).__name__}: {e})")
        return job
    key = hashlib.sha256(payload).hexdigest()
    with _LOCK:
        job = _JOBS.get(key)
    if job is not None and job.pid == os.getpid() and job.result != ('forked', None):
        return job
    job = Job(payload, directory)
    with _LOCK:
        _JOBS[key] = job
        while len(_JOBS) > _KEEP:
            del _JOBS[next(iter(_JOBS))]
    return job


class Job:
    """One background compile: a child process compiling ``program`` into ``directory``.
    ``result`` is None while it runs, then ``('numba', path)`` (compiled and cached),
    ``('python', message)`` (numba cannot compile it, or its code cannot be cached, or the
    child failed: the message says which) or ``('forked', None)`` (this process is a fork
    of the one that started the child)."""

    def __init__(self, payload, directory):
        self.result, self.directory, self.pid = None, directory, os.getpid()
        self.started = time.perf_counter()
        self.finished = None
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, NESTAD_CACHE_DIR=os.path.dirname(directory),
                   PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get('PYTHONPATH')) if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from nestad.staging.tiered import _child; _child()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        with _LOCK:
            _RUNNING.add(self)
        threading.Thread(target=self._wait, args=(payload,), daemon=True,
                         name="nestad tiered compile").start()

    def _wait(self, payload):
        """(the daemon thread) send the program, read the child's answer, reap it."""
        proc = self.proc
        try:
            proc.stdin.write(len(payload).to_bytes(8, 'little') + payload)
            proc.stdin.flush()
            out = proc.stdout.read()
        except (OSError, ValueError):   # (the pipes closed under us: killed at exit)
            out = b''
        code = proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        with _LOCK:
            _RUNNING.discard(self)
        try:
            result = pickle.loads(out) if code == 0 else None
        except Exception:
            result = None
        if result is not None and result[0] == 'numba':
            _warm()
        if result is None:
            result = ('python', f"the tiered backend's compiling process ended with exit code "
                                f"{code} and no answer")
        self.finished = time.perf_counter()
        if self.result is None:         # (a fork sets 'forked' in its own copy only)
            self.result = result

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass


def _has_numba():
    if 'numba' in sys.modules:
        return sys.modules['numba'] is not None
    try:
        return importlib.util.find_spec('numba') is not None
    except (ImportError, ValueError):
        return False


class Tier:
    """The function a tiered program's ``Compiled`` calls until numba's code is loaded:
    the Python backend's function, then (once its job is done) the switch, which
    replaces ``compiled.fn`` with a ``Trial`` of numba's function against the Python one
    (or with the Python one for good)."""
    __slots__ = ('compiled', 'python', 'job', 'pause')

    def __init__(self, compiled, python):
        self.compiled, self.python = compiled, python
        self.pause = None               # seconds the switching call spent loading
        if not _has_numba():             # (not imported here: that alone takes 0.4 s)
            warnings.warn('stage(backend="tiered") needs numba for its second tier (pip '
                          'install "nestad[numba]"); the program runs as Python code',
                          NumbaFallbackWarning, stacklevel=5)
            self.job = None             # (the caller calls the Python function itself)
            return
        self.job = job_for(compiled.program, cache_dir())

    def __call__(self, *args):
        if self.job.result is not None:
            self.switch()
            return self.compiled.fn(*args)
        return self.python(*args)

    def switch(self):
        kind, detail = self.job.result
        fn = self.python
        if kind == 'numba':
            start = time.perf_counter()
            fn = compile_numba(self.python, self.compiled.program, self.job.directory,
                               load_only=True)
            self.pause = time.perf_counter() - start
            if fn is None:
                fn = self.python
                warnings.warn("numba's code of a staged program was not in the disk cache "
                              f"where its compiling process put it ({detail}); it runs as "
                              "Python code instead", NumbaFallbackWarning, stacklevel=6)
        elif kind == 'python':
            warnings.warn(f"{detail}; it runs as Python code instead", NumbaFallbackWarning,
                          stacklevel=6)
        self.compiled.fn = fn if fn is self.python else Trial(self, fn)

    @property
    def name(self):
        """'python' until the switch has loaded numba's code, then 'numba' (while the
        tiers take turns, and after it where numba's code was the faster), or 'python'
        again for good where the trial found the Python code faster."""
        fn = self.compiled.fn
        return 'python' if fn is self or fn is self.python else 'numba'

    def wait(self, timeout=None):
        """Block until the child is done (or ``timeout`` seconds passed); True if done."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.job is not None and self.job.result is None:
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(0.01)
        return True


# After the switch the two tiers take turns for TRIAL_CALLS calls, each call timed, and
# the program keeps the one with the smaller median time.  numba's code is usually several
# times faster, but not always: gmm's stacked jet at k = 8 ran 421 us per call as numba's
# code against 314 us as the Python code's (notes/staging.md, "Tiers").  Taking turns
# costs no extra call: each call runs once, on one tier.
TRIAL_CALLS = 20


class Trial:
    """A tiered program's function during its trial: numba's code and the Python code in
    turn, timed; after ``TRIAL_CALLS`` calls ``compiled.fn`` is the faster of the two."""
    __slots__ = ('tier', 'fns', 'times', 'calls')

    def __init__(self, tier, numba_fn):
        self.tier, self.fns, self.times, self.calls = tier, (numba_fn, tier.python), ([], []), 0

    def __call__(self, *args):
        k = self.calls & 1
        self.calls += 1
        start = time.perf_counter()
        out = self.fns[k](*args)
        self.times[k].append(time.perf_counter() - start)
        if self.calls >= TRIAL_CALLS and self.times[0] and self.times[1]:
            fast = statistics.median(self.times[0]) <= statistics.median(self.times[1])
            self.tier.compiled.fn = self.fns[0] if fast else self.fns[1]
        return out


@atexit.register
def _kill_children():
    with _LOCK:
        jobs = [j for j in _RUNNING if j.pid == os.getpid()]
    for job in jobs:
        job.kill()
    for job in jobs:
        try:
            job.proc.wait(timeout=5)
        except Exception:
            pass


def _warm():
    """(the job's thread, before it reports the child's answer) numba imported and taught
    here, its typing context filled: 1-4 s of a process's first numba program (importing
    numba, its numpy registries, scipy's BLAS), which would otherwise be the switching
    call's pause.  Held under ``_LOADING``, which a fork waits for (``_forking``): a fork
    in the middle of an import or of numba's compiler lock would leave them held."""
    with _LOADING:
        try:
            import numba
            from numba.core.registry import cpu_target
            numba_backend._teach(numba)
            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
        except Exception:               # (the switch then does it, and says what failed)
            pass


def _forking():
    _LOADING.acquire()


def _forked_parent():
    _LOADING.release()


def _forked():
    """(in a forked child) the jobs are its parent's: let go of its copies of their pipes,
    so that a child still sees its parent's end when the parent exits, and stay on
    Python.  (No lock or file object is touched: the parent's thread may have held them
    at the fork; the pipe ends are replaced by /dev/null under the same numbers.)"""
    global _LOCK, _LOADING
    _LOCK, _LOADING = threading.Lock(), threading.Lock()
    jobs = list(_RUNNING)
    _RUNNING.clear()
    for job in jobs:
        job.result = job.result or ('forked', None)
        null = os.open(os.devnull, os.O_RDWR)
        for f in (job.proc.stdin, job.proc.stdout):
            try:
                os.dup2(null, f.fileno())
            except (OSError, ValueError):
                pass
        os.close(null)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(before=_forking, after_in_parent=_forked_parent, after_in_child=_forked)


def _child():
    """The compiling process: read the pickled (program, directory) from stdin, compile it
    with numba into the directory, write the pickled result to stdout; exit as soon as
    stdin closes (the parent is gone)."""
    stdin = sys.stdin.buffer
    size = int.from_bytes(stdin.read(8), 'little')
    payload = stdin.read(size)

    def watch():
        stdin.read()                    # returns when every holder of its other end is gone
        os._exit(3)
    threading.Thread(target=watch, daemon=True).start()
    try:
        result = _compile(*pickle.loads(payload))
    except BaseException as e:
        result = ('python', f"the tiered backend's compiling process failed "
                            f"({type(e).__name__}: {e})")
    out = sys.stdout.buffer
    out.write(pickle.dumps(result))
    out.flush()
    os._exit(0)


def _compile(program, directory, settings=None):
    for name, value in (settings or {}).items():    # (None: a parent of an older nestad)
        setattr(numba_backend, name, value)
    def staged(*args):                  # (compile_numba's answer where numba cannot compile)
        raise AssertionError
    info = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', NumbaFallbackWarning)
        fn = compile_numba(staged, program, directory, info)
    falls = [w for w in caught if issubclass(w.category, NumbaFallbackWarning)]
    if fn is staged:
        text = str(falls[0].message) if falls else "numba could not compile a staged program"
        return 'python', text.split("; it runs")[0]
    if info.get('path') is None:
        return 'python', ("numba's code of a staged program cannot be cached on disk (a global "
                          "known only by its address, or no writable cache directory)")
    if compile_numba(staged, program, directory, load_only=True) is None:
        said = [str(w.message).splitlines()[0] for w in caught
                if 'cache' in str(w.message).lower()][:1]
        return 'python', ("numba did not store a staged program's code on disk"
                          + (f" ({said[0]})" if said else ""))
    return 'numba', info['path']
