"""GUI responsiveness: start-up time, the main thread's lateness over the window's whole life
and while runs stream updates into the panels, and the time to redraw the panels with big data.
Not a test; prints a table.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_gui.py
    xvfb-run -a .venv/bin/python bench/bench_gui.py          # a real X server (xcb)
    xvfb-run -a .venv/bin/python bench/bench_gui.py --only life --seconds 6

Options: --only {startup,life,latency,redraw} (repeatable), --startups N, --seconds S,
--long-model T (the redraw part also draws a model trace of T steps, B=8, H=128).
The machine's load (`uptime`) is printed with the figures: timings on a shared machine are noisy.

- start-up: `python main.py --screenshot` in a subprocess with LSTMVIZ_TIMING=1 (the app prints
  time stamps on stdout): seconds from launching the process to the window's first paint and to
  TensorFlow ready (the window settled with TensorFlow imported). Median of N launches.
- life: the app as `lstmviz gui --demo` starts it, in a subprocess, with a 10 ms single-shot
  timer re-armed on every tick of its event loop from the start (`life_driver`); after the demo
  a training run, a multi-pass run of 400 passes and a first run of a new shape, each from a
  settled window (stopped after S seconds if still running). For the demo (first paint → its
  trace drawn), each run (its start → it has ended and been drawn) and the whole life after the
  first paint: p50/p99 lateness and the longest stall, counting stalls begun after the first
  paint, and when the stalls over 50 ms began. Goal: no stall over 50 ms, p99 ≤ 16 ms.
- latency: the same timer in this process's window (TensorFlow warm in its computing process),
  from each run's start (its tracing included) until it has ended and its trace is drawn, or S
  seconds: (a) nothing runs, (b) a real training run streams ~30 updates a second, (c) a real
  multi-pass run with many short passes streams one update per pass, (d) a first run of a new
  shape, (e) a stand-in engine (no TensorFlow work) streams 200 rows × T=2000 at 30 updates a
  second into every panel (the drawing alone), (f) a stand-in model run (4 LSTM directions,
  T=2000, B=32, H=128: started, done with the rows, then the trace drawn in the model panels),
  (g) the same model's real run (Embedding(mask_zero) → Bidirectional(LSTM) → LSTM → LSTM →
  Dense). Goal: p99 < 16 ms.
- redraw: with T=2000 curves (10 per-batch curves and the three main ones; white noise, the
  worst case for painting, and real per-batch norms from the engine) and 200 × 2000 heatmaps,
  median of 10 after a warm-up, each redraw with new data (two traces in turn; a live update
  adds one row). Through the window (`_draw`, every panel), which draws one panel per event-loop
  turn: the total and the longest step (a panel's draw plus the repaint it causes); one panel:
  `draw(...)` plus a synchronous repaint of that panel. The same for a model trace (4
  directions, T=2000, B=32, H=128) in the model panels. Goal: < 16 ms (the longest step).
  The heatmaps' reductions of the gradient arrays are kept with each array after its first
  draw, as the window finds them (the worker thread computes them before a trace arrives:
  `plots.prepare`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's lstmviz, not an installed one

import numpy as np  # noqa: E402

GOAL_MS = 16.0


def app_env(**extra: str) -> dict[str, str]:
    """The environment for the app in a subprocess: the X server's display where there is
    one (under `xvfb-run`, xcb), else the offscreen platform."""
    env = dict(os.environ, **extra)
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


# ---- start-up --------------------------------------------------------------------------------


def startup(runs: int) -> list[tuple[str, str, str]]:
    shown, ready = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = app_env(LSTMVIZ_TIMING="1", XDG_CONFIG_HOME=tmp)
        for _ in range(runs):
            start = time.time()
            result = subprocess.run(
                [sys.executable, "main.py", "--screenshot", str(Path(tmp) / "shot.png")],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            stamps = {}
            for line in result.stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[0] == "lstmviz-timing":
                    stamps[parts[1]] = float(parts[2]) - start
            if result.returncode != 0 or "tf-ready" not in stamps:
                sys.exit(f"start-up run failed ({result.returncode}):\n{result.stderr[-2000:]}")
            shown.append(stamps["window-shown"])
            ready.append(stamps["tf-ready"])
    note = f"median of {runs}; {load()}"
    return [
        ("start-up: launch → window painted", f"{statistics.median(shown):.2f} s", note),
        ("start-up: launch → TensorFlow ready", f"{statistics.median(ready):.2f} s", note),
        ("  (each run, shown / ready)", " ".join(f"{s:.2f}/{r:.2f}" for s, r in
                                                 zip(shown, ready, strict=True)), ""),
    ]  # fmt: skip


# ---- in-process helpers ----------------------------------------------------------------------


def make_window(tmp: str):
    import pyqtgraph as pg
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from lstmviz.gui.app import use_small_pages
    from lstmviz.gui.main_window import MainWindow

    use_small_pages()  # as `lstmviz gui` does
    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")
    pg.setConfigOptions(antialias=True, background="w", foreground="#222")
    settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, quiet_errors=True)
    window.show()
    wait_until(app, lambda: window.device is not None, 120)
    return app, window


def wait_until(app, condition, seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while not condition():
        if time.perf_counter() > deadline:
            sys.exit("timed out")
        app.processEvents()
        time.sleep(0.002)


class LatencyProbe:
    """A 10 ms single-shot timer re-armed on each tick; records how late each tick fires."""

    def __init__(self, interval_ms: int = 10, stamped: bool = False):
        from PySide6.QtCore import Qt, QTimer

        self.interval = interval_ms / 1000
        self.stamped = stamped  # keep (epoch seconds, lateness) of every tick in `ticks`
        self.ticks: list[tuple[float, float]] = []
        self.timer = QTimer(singleShot=True, interval=interval_ms)
        self.timer.setTimerType(Qt.PreciseTimer)
        self.timer.timeout.connect(self._tick)
        self.late: list[float] = []
        self.armed = 0.0

    def start(self) -> None:
        self.late.clear()
        self.armed = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.late.append(max(0.0, now - self.armed - self.interval) * 1000)
        if self.stamped:
            self.ticks.append((time.time(), self.late[-1]))
        self.armed = now
        self.timer.start()


def synthetic_run(config, cancelled=bool, keep=bool, rows=200, steps=2000, batch=8, hidden=200):
    """A fake engine (`Worker.engine`): per-batch rows of T=2000 arriving at 30 updates a second
    (sleeping in between, so only the drawing costs the window), then a final trace."""
    from lstmviz.io.trace import GradientTrace, TraceUpdate

    rng = np.random.default_rng(0)
    data = np.exp(rng.standard_normal((rows, steps))).astype(np.float32)
    for r in range(rows):
        if cancelled():
            return
        time.sleep(1 / 30)
        yield TraceUpdate(r + 1, rows, f"batch {r + 1}/{rows}",
                          {"norm_h_total_by_batch": data[: r + 1], "norm_h_total": data[r]})
    yield GradientTrace("batchwise", config, big_arrays(rows, steps, batch, hidden))


def big_arrays(rows: int = 200, steps: int = 2000, batch: int = 8, hidden: int = 200):
    """A finished per-batch trace: 3 curves of T=2000, 200 rows × 2000, grad [2000, 8, 200]."""
    rng = np.random.default_rng(1)
    curve = np.exp(rng.standard_normal(steps)).astype(np.float32)
    return {
        "norm_h_total": curve,
        "norm_h_direct": curve / 3,
        "norm_c_total": curve * 2,
        "norm_h_total_by_batch": np.exp(rng.standard_normal((rows, steps))).astype(np.float32),
        "grad_h_total": rng.standard_normal((steps, batch, hidden)).astype(np.float32),
        "loss": np.float32(0.5),
    }


MODEL_SIZES = {"steps": 2000, "batch": 32, "hidden": 128}  # 4 LSTM directions


def model_arrays(steps: int = 2000, batch: int = 32, hidden: int = 128, seed: int = 2) -> dict:
    """A finished model trace's arrays: 4 LSTM directions (a Bidirectional, then two LSTMs) of
    [T, B, H] gradients, gates, norms by layer, saliency over token ids with padding."""
    rng = np.random.default_rng(seed)
    names = ["bi/forward", "bi/backward", "middle", "top"]
    lengths = rng.integers(steps // 2, steps + 1, batch)
    mask = np.arange(steps)[:, None] < lengths[None, :]  # [T, B]
    decay = np.exp(np.linspace(-8, 0, steps))[:, None, None]
    arrays = {"layer_names": np.array(names), "mask": mask, "loss": np.float32(0.6),
              "x": np.where(mask, rng.integers(1, 50, (steps, batch)), 0).astype(np.int32),
              "nonfinite_steps": np.zeros(0, np.int64)}  # fmt: skip
    for k in range(len(names)):
        g = (rng.standard_normal((steps, batch, hidden)) * decay).astype(np.float32)
        arrays[f"layer{k}_grad_h_total"] = g
        arrays[f"layer{k}_gates_mean"] = rng.uniform(0, 1, (4, steps)).astype(np.float32)
        arrays[f"layer{k}_gates_saturated"] = rng.uniform(0, 0.2, (4, steps)).astype(np.float32)
    rows = np.stack([np.sqrt((arrays[f"layer{k}_grad_h_total"] ** 2).sum(axis=(1, 2)))
                     for k in range(len(names))]).astype(np.float32)  # fmt: skip
    for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
        arrays[f"{key}_by_layer"] = rows
    grad_input = (rng.standard_normal((steps, batch, 16)) * decay).astype(np.float32)
    arrays["grad_input"] = grad_input
    arrays["saliency"] = np.linalg.norm(grad_input, axis=-1).T.astype(np.float32)
    return arrays


def synthetic_model_run(config, cancelled=bool, keep=bool, compute_seconds: float = 1.0):
    """A fake model engine (`Worker.engine`): started, the rows after `compute_seconds`, then
    the trace."""
    from lstmviz.io.trace import GradientTrace, TraceUpdate

    arrays = model_arrays(**MODEL_SIZES)
    yield TraceUpdate(0, 1, "model: 4 LSTM directions, loss binary_crossentropy")
    time.sleep(compute_seconds)
    if cancelled():
        return
    rows = {k: arrays[k] for k in arrays if k.endswith("_by_layer")}
    yield TraceUpdate(1, 1, "done", rows)
    yield GradientTrace("model", config, arrays)


def real_model_file(folder: str) -> str:
    """The model of scenario (f), saved as .keras, and its data (.npz) next to it."""
    import keras

    steps, batch, hidden = MODEL_SIZES["steps"], MODEL_SIZES["batch"], MODEL_SIZES["hidden"]
    layers = keras.layers
    model = keras.Sequential([keras.Input((steps,), dtype="int32"),
                              layers.Embedding(50, 16, mask_zero=True),
                              layers.Bidirectional(layers.LSTM(hidden, return_sequences=True)),
                              layers.LSTM(hidden, return_sequences=True), layers.LSTM(hidden),
                              layers.Dense(1, activation="sigmoid")])  # fmt: skip
    model.compile(loss="binary_crossentropy")
    path = str(Path(folder) / "model.keras")
    model.save(path)
    arrays = model_arrays(steps, batch, 4)
    np.savez(Path(folder) / "data.npz", x=arrays["x"].T, y=np.ones((batch, 1), np.float32))
    return path


def engine_arrays(rows: int = 200, steps: int = 2000) -> dict:
    """big_arrays() with real gradient-norm curves: a per-batch run of the engine (20 batches
    of B=4, H=32, random weights; their rows repeated to 200), for the norm panel's realistic
    cost next to the white-noise worst case."""
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.modes.batchwise import run_batchwise

    config = RunConfig(mode="batchwise", steps=steps, batches=20, batch=4, hidden=32)
    *_, trace = run_batchwise(config)
    arrays = big_arrays(rows, steps)
    by_batch = np.asarray(trace["norm_h_total_by_batch"], np.float32)  # [20, T]
    arrays["norm_h_total_by_batch"] = np.resize(by_batch, (rows, steps))
    for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
        arrays[key] = np.asarray(trace.arrays[f"{key}_by_batch"][0], np.float32)
    return arrays


def latency(seconds: float) -> list[tuple[str, str, str]]:
    import functools

    from lstmviz.core.config import RunConfig

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        app, window = make_window(tmp)
        from PySide6.QtWidgets import QMessageBox

        window.run_view.ask_keep = lambda done: QMessageBox.No  # Stop in training asks; don't keep
        probe = LatencyProbe()

        def measure(name: str, config: RunConfig | None, engine=None):
            """From the run's start (its tracing included) until it has ended and its trace
            is drawn, or `seconds`; `engine`: a stand-in for `runner.run`."""
            ran = []
            window.worker.engine = engine
            if config is not None:
                window.worker.progress.connect(count := lambda *_: ran.append(1))
            probe.start()
            if config is not None:
                assert window.start_run(config), f"refused: {config}"
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline and (config is None or window.state.running):
                app.processEvents()
                time.sleep(0.0005)
            settle = time.perf_counter() + 0.3
            while window.area.busy() or time.perf_counter() < settle:  # the trace drawn
                app.processEvents()
                time.sleep(0.0005)
            probe.stop()
            window.run_view.stop()
            if config is not None:
                window.worker.progress.disconnect(count)
            wait_until(app, lambda: not window.area.stages, 10)  # panels left to draw (`_draw`)
            shape = window.area.by_name["layer_map" if "layer_map" in window.area.shown
                                        else "rows"].data.shape  # fmt: skip
            idle = time.perf_counter() + 0.3  # the stopped run ends (≤ 0.1 s)
            wait_until(app, lambda: time.perf_counter() > idle, 10)
            late = probe.late
            figures = f"{pct(late, 50):.1f} / {pct(late, 99):.1f} / {max(late):.1f} ms"
            ok = "✓" if pct(late, 99) < GOAL_MS else "✗"
            note = (f"{ok} {len(late)} ticks, {len(ran)} updates, rows heatmap "
                    f"{shape[0]}×{shape[1]}; {load()}")  # fmt: skip
            out.append((f"latency p50/p99/max: {name}", figures, note))
            print(*out[-1], sep="  ", flush=True)

        measure("idle, TensorFlow loaded", None)
        measure("training (adding, T=100, B=32, H=64)", RunConfig(
            mode="train", task="adding", steps=100, batch=32, hidden=64, train_steps=5000))
        measure("multi-pass (P=400 passes of T=20, B=16, H=64)",
                RunConfig(mode="multipass", steps=20, passes=400, batch=16, hidden=64))
        measure("first run of a new shape (taped T=400, B=24, I=8, H=72)",
                RunConfig(mode="taped", steps=400, batch=24, input_dim=8, hidden=72))
        measure("synthetic 200 rows × T=2000, 30 updates/s", RunConfig(mode="batchwise"),
                engine=synthetic_run)
        measure("synthetic model, 4 directions × T=2000, B=32, H=128",
                RunConfig(mode="model", model="model.keras"),
                engine=functools.partial(synthetic_model_run, compute_seconds=1.0))
        # Keras writes the model in another process: this one is the window's (no TensorFlow)
        subprocess.run([sys.executable, __file__, "--model-file", tmp], check=True)
        config = RunConfig(mode="model", model=str(Path(tmp) / "model.keras"),
                           inputs=str(Path(tmp) / "data.npz"))  # fmt: skip
        measure("real model run (tracing included), same sizes", config)
        window.close()
    return out


# ---- the window's whole life -----------------------------------------------------------------

LIFE_RUNS = {  # after the demo, each started once the window has settled (half a second later)
    "training (adding, T=100, B=32, H=64)": dict(
        mode="train", task="adding", steps=100, batch=32, hidden=64, train_steps=5000),
    "multi-pass (P=400 of T=20, B=16, H=64)": dict(
        mode="multipass", steps=20, passes=400, batch=16, hidden=64),
    "first run of a new shape (taped T=400, B=24, H=72)": dict(
        mode="taped", steps=400, batch=24, input_dim=8, hidden=72),
}


def life_driver(seconds: float) -> None:
    """Run in a subprocess (`--life-driver`): the app as `lstmviz gui --demo` starts it, with a
    10 ms timer on its event loop from the start; after the demo the runs of `LIFE_RUNS` (each
    stopped after `seconds` if still running), then the window closes. Prints one line,
    `lstmviz-life {JSON}`: the ticks (epoch seconds, lateness in ms) and each phase's
    [name, start, end]; the demo's start is the first paint (the LSTMVIZ_TIMING stamps)."""
    import json

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from lstmviz.core.config import RunConfig
    from lstmviz.gui import app as gui_app
    from lstmviz.gui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    probe = LatencyProbe(stamped=True)
    phases: list[list] = [["demo", None, None]]
    runs = list(LIFE_RUNS.items())
    window = None

    def begin() -> None:
        if not runs:
            window.close()
            return
        name, config = runs.pop(0)
        phases.append([name, time.time(), None])
        window.start_run(RunConfig(**config))
        run_id = window.state.last_id
        QTimer.singleShot(int(seconds * 1000), lambda: window.state.active == run_id
                          and window.run_view.stop())  # fmt: skip

    def settled() -> None:  # idle, every panel drawn (the demo: once it has its trace)
        name, _, end = phases[-1]
        if end is None and not window.state.running and (name != "demo" or window.trace):
            phases[-1][2] = time.time()
            QTimer.singleShot(500, begin)

    def found() -> None:
        nonlocal window
        window = next(w for w in app.topLevelWidgets() if isinstance(w, MainWindow))
        window.run_view.ask_keep = lambda done: QMessageBox.No
        window.settled.connect(settled)

    QTimer.singleShot(0, found)
    probe.start()
    gui_app.main(demo=True)
    print("lstmviz-life", json.dumps({"ticks": probe.ticks, "phases": phases,
                                      "platform": app.platformName()}), flush=True)  # fmt: skip
    os._exit(0)


def life(seconds: float) -> list[tuple[str, str, str]]:
    """The window's whole life in a subprocess (`life_driver`): launch → first paint, then for
    the demo, each run and the whole life after the first paint, the timer's lateness (p50/p99)
    and the longest stall, counting stalls that began after the first paint."""
    import json

    env = app_env(LSTMVIZ_TIMING="1")
    with tempfile.TemporaryDirectory() as tmp:
        env["XDG_CONFIG_HOME"] = tmp
        start = time.time()
        done = subprocess.run([sys.executable, __file__, "--life-driver", "--seconds",
                               str(seconds)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    stamps, data = {}, None
    for line in done.stdout.splitlines():
        parts = line.split(maxsplit=2)
        if parts[:1] == ["lstmviz-timing"]:
            stamps.setdefault(parts[1], float(parts[2]))
        elif parts[:1] == ["lstmviz-life"]:
            data = json.loads(line.split(maxsplit=1)[1])
    if data is None or "window-shown" not in stamps:
        sys.exit(f"life run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    shown = stamps["window-shown"]
    phases = data["phases"]
    phases[0][1] = shown
    end = max((p[2] for p in phases if p[2]), default=shown)  # before the window closes
    phases.append(["whole life after the first paint", shown, end])
    out = [("life: launch → window painted", f"{shown - start:.2f} s",
            f"TensorFlow ready at {stamps.get('tf-ready', float('nan')) - start:.2f} s; Qt "
            f"platform {data['platform']}; {load()}")]  # fmt: skip
    for name, begin, finish in phases:
        finish = finish or end
        # a tick late by L ms waited from (t − L − 10 ms): count the stalls begun in the phase
        late = [ms for t, ms in data["ticks"] if begin <= t - (ms + 10) / 1000 and t <= finish]
        worst = max(late, default=float("nan"))
        when = [f"{t - (ms + 10) / 1000 - shown:.1f} s" for t, ms in data["ticks"]
                if ms > 50 and begin <= t - (ms + 10) / 1000 and t <= finish]  # fmt: skip
        ok = "✓" if worst <= 50 and pct(late, 99) <= GOAL_MS else "✗"
        note = (f"{ok} {finish - begin:.1f} s, {len(late)} ticks, stalls > 50 ms at: "
                f"{', '.join(when[:8]) or 'none'}")  # fmt: skip
        out.append((f"life p50/p99/max: {name}",
                    f"{pct(late, 50):.1f} / {pct(late, 99):.1f} / {worst:.1f} ms", note))
        print(*out[-1], sep="  ", flush=True)
    return out


# ---- redraw ----------------------------------------------------------------------------------


def redraw(repeats: int = 10, long_steps: int = 0) -> list[tuple[str, str, str]]:
    from lstmviz.core.config import RunConfig

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        app, window = make_window(tmp)
        config = RunConfig(mode="batchwise", steps=2000, batches=200, batch=8, hidden=200)
        # each redraw shows new data, as a new trace or a live update would (redrawing the same
        # data skips the curves that did not change): two traces in turn; live, one more row
        traces = [big_arrays(), {k: v * 2 for k, v in big_arrays().items()}]
        by_batch = traces[0]["norm_h_total_by_batch"]

        def live(i: int) -> dict:
            return {"norm_h_total_by_batch": by_batch[: 100 + i], "norm_h_total": by_batch[99 + i]}

        def timed(name: str, panel, draw) -> None:
            draw(0)
            app.processEvents()
            times = {"draw": [], "paint": []}
            for i in range(1, repeats + 1):
                t0 = time.perf_counter()
                draw(i)
                t1 = time.perf_counter()
                panel.repaint()  # the panel paints now, synchronously
                app.processEvents()
                t2 = time.perf_counter()
                times["draw"].append((t1 - t0) * 1000)
                times["paint"].append((t2 - t1) * 1000)
            d, p = statistics.median(times["draw"]), statistics.median(times["paint"])
            ok = "✓" if d + p < GOAL_MS else "✗"
            note = f"{ok} draw {d:.1f} + paint {p:.1f} ms, median of {repeats}; {load()}"
            out.append((f"redraw: {name}", f"{d + p:.1f} ms", note))
            print(*out[-1], sep="  ", flush=True)

        def staged(name: str, draw) -> None:
            """A redraw through the window: the panels draw one per event-loop turn, each
            step timed with the repaint it causes."""

            def steps(i: int) -> list[tuple[float, float]]:
                done, step = [], lambda: draw(i)
                while step is not None:
                    t0 = time.perf_counter()
                    step()
                    window.area.stage_timer.stop()  # the next step runs here, after this repaint
                    t1 = time.perf_counter()
                    app.sendPostedEvents()  # the scenes' changes post the window's repaint…
                    app.sendPostedEvents()  # …which runs here
                    done.append(((t1 - t0) * 1000, (time.perf_counter() - t1) * 1000))
                    step = window.area.turn if window.area.busy() else None
                return done

            steps(0)
            runs = [steps(i) for i in range(1, repeats + 1)]
            total = statistics.median(sum(d + p for d, p in run) for run in runs)
            longest = statistics.median(max(d + p for d, p in run) for run in runs)
            ok = "✓" if longest < GOAL_MS else "✗"
            note = (f"{ok} {len(runs[0])} steps, longest {longest:.1f} ms (draw + its repaint), "
                    f"median of {repeats}; {load()}")  # fmt: skip
            out.append((f"redraw: {name}", f"{total:.1f} ms", note))
            print(*out[-1], sep="  ", flush=True)

        def draw(arrays, rows_total=None):
            window.area.draw(arrays, config, rows_total, live=rows_total is not None)

        staged("finished trace, every panel", lambda i: draw(traces[i % 2]))
        real = [engine_arrays()]
        real.append({k: v * 2 for k, v in real[0].items()})
        staged("the same, engine curves", lambda i: draw(real[i % 2]))
        staged("live update (one more of 200 rows)", lambda i: draw(live(i), 200))
        for name, panel in (
            ("norm panel only (13 curves × 2000)", window.area.norm),
            ("rows heatmap only (200 × 2000)", window.area.rows),
            ("units heatmap only (200 × 2000 from [2000, 8, 200])", window.area.units),
        ):
            timed(name, panel, lambda i, panel=panel: panel.draw(traces[i % 2], config))
        timed("norm panel only, engine curves", window.area.norm,
              lambda i: window.area.norm.draw(real[i % 2], config))  # fmt: skip
        model = RunConfig(mode="model", **MODEL_SIZES)
        models = [model_arrays(seed=2), model_arrays(seed=3)]
        staged("model trace (4 × T=2000, B=32, H=128), every model panel",
               lambda i: window.area.draw(models[i % 2], model, None, live=False))
        for name in ("layers", "gates", "layer_map", "saliency", "layer_units"):
            panel = window.area.by_name[name]
            timed(f"model: {name} only", panel,
                  lambda i, panel=panel: panel.draw(models[i % 2], model))  # fmt: skip
        if long_steps:  # a long model trace: more steps than a screen has pixels
            sizes = {"steps": long_steps, "batch": 8, "hidden": 128}
            model = RunConfig(mode="model", **sizes)
            models = [model_arrays(**sizes, seed=2), model_arrays(**sizes, seed=3)]
            staged(f"model trace (4 × T={long_steps}, B=8, H=128), every model panel",
                   lambda i: window.area.draw(models[i % 2], model, None, live=False))
            for name in ("layers", "gates", "layer_map", "saliency", "layer_units"):
                panel = window.area.by_name[name]
                timed(f"model T={long_steps}: {name} only", panel,
                      lambda i, panel=panel: panel.draw(models[i % 2], model))  # fmt: skip
        window.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ("startup", "life", "latency", "redraw")
    parser.add_argument("--only", action="append", choices=parts)
    parser.add_argument("--startups", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="per latency scenario")
    parser.add_argument("--long-model", type=int, default=0, metavar="T",
                        help="redraw also a model trace of T steps (B=8, H=128)")
    parser.add_argument("--life-driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.life_driver:
        life_driver(args.seconds)
    if args.model_file:
        real_model_file(args.model_file)
        os._exit(0)
    parts = args.only or parts
    from PySide6 import __version__ as pyside

    rows = []
    if "startup" in parts:
        rows += startup(args.startups)
    if "life" in parts:
        rows += life(args.seconds)
    if "latency" in parts:  # before redraw: it runs an engine in this process
        rows += latency(args.seconds)
    if "redraw" in parts:
        rows += redraw(long_steps=args.long_model)
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    platform = app.platformName() if app else os.environ.get("QT_QPA_PLATFORM", "default")
    print(f"\nlstmviz GUI benchmark · PySide6 {pyside} · Qt platform {platform} · "
          f"{os.cpu_count()} CPUs · {load()}")  # fmt: skip
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>{value_width}}  {note}")
    sys.stdout.flush()
    os._exit(0)  # the windows are closed; skip tearing down Qt at exit


if __name__ == "__main__":
    main()
