"""Builders of real records for tests (no mocks: these are the same frozen records the code passes)."""

from __future__ import annotations

from adlrec.schemas import Baseline, DeviceSpec, GpuInfo, Hardware, Profile, ProfilePoint


def make_profile(
    throughputs=(10.0, 20.0, 15.0),
    device: DeviceSpec | None = None,
    workload: str = "w",
    params: dict | None = None,
) -> Profile:
    device = device or DeviceSpec("emulate", 5.0)
    hw = Hardware("Test CPU", 8, 4, 31.9, (GpuInfo("H200", 139.8),), "2.13.0", "Linux", "host")
    pts = tuple(
        ProfilePoint(
            workers=w,
            throughput=t,
            rse=0.01,
            batches=50,
            seconds=1.0,
            stable=True,
            wait_fraction=0.1,
            stall_fraction=0.2,
            prep_share=0.2,
            fetch_share=0.0,
            prep_rate=t * 2,
            cpu_util=0.5,
            worker_uss_mb=10.0 if w else 0.0,
            worker_pss_mb=12.0 if w else 0.0,
            main_rss_mb=300.0,
        )
        for w, t in enumerate(throughputs)
    )
    base = Baseline(25.0, 0.01, 12.0, 1e-4, 1e-5, 4096.0, "posix_fadvise(DONTNEED) per file")
    return Profile(
        workload,
        "abc",
        params or {"batch_size": 8, "n": 3},
        8,
        device,
        hw,
        base,
        pts,
        1.0,
        0.05,
        f"adlrec profile {workload}.py",
        "2026-12-02T00:00:00+00:00",
    )


def synthetic_profiles(workloads: int = 6, devices=("emulate:5", "emulate:20"), max_workers: int = 4, seed: int = 0):
    """Profiles whose curves follow a hidden pipeline rule, for fitting and evaluating models.

    Each workload has its own per-sample prep cost and batch size; each device its step time.  The
    "measured" throughput is ``min(0.9 C, P1 * w^0.8)`` with a little noise: close to, but not the
    same as, the analytic model, so a learned correction has something to learn.
    """
    import random
    from dataclasses import replace

    rng = random.Random(seed)
    out = []
    for k in range(workloads):
        prep_per_sample = rng.uniform(0.3e-3, 3e-3)
        batch = rng.choice([16, 32, 64])
        params = {"batch_size": batch, "variant": k}
        for dev in devices:
            step_ms = float(dev.split(":")[1])
            ceiling = batch / (step_ms / 1000)
            p0 = 1 / prep_per_sample
            rates = [p0 * (0.8 if w == 1 else 1.0) * max(1, w) ** 0.9 for w in range(max_workers + 1)]
            curve = [1 / (1 / ceiling + 1 / p0)] + [
                min(0.9 * ceiling, rates[1] * w**0.8) * rng.uniform(0.97, 1.03) for w in range(1, max_workers + 1)
            ]
            base = make_profile(
                throughputs=curve, device=DeviceSpec("emulate", step_ms), workload=f"wl{k}", params=params
            )
            points = tuple(replace(p, prep_rate=rates[p.workers]) for p in base.points)
            out.append(
                replace(
                    base,
                    batch_size=batch,
                    points=points,
                    baseline=replace(base.baseline, ceiling=ceiling, prep_rate=p0),
                )
            )
    return out


class Indices:
    """A map-style dataset whose sample is its own index: order checks need nothing else.

    Defined here, at module level, so DataLoader workers (fork or spawn) can unpickle it.
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def register_model_of_other_features(registry, curves) -> str:
    """Register, as the champion, a learned model as an adlrec with other features would have pickled it:
    its estimator expects 10 columns where this adlrec's rows have 12.  It loads; it cannot predict."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingRegressor

    from adlrec.predict.evaluate import cross_validate
    from adlrec.predict.models import LearnedModel

    model = LearnedModel(n_estimators=5)
    rng = np.random.default_rng(0)
    model.estimator = GradientBoostingRegressor(n_estimators=5).fit(rng.random((20, 10)), rng.random(20))
    _, version = registry.register(model, cross_validate({"kind": "analytic"}, curves), params={})
    registry.set_champion(version)
    return version


class ScriptedModel:
    """A throughput model that predicts one given curve for any probe (its last point past its end): what a
    model adlrec did not fit (registered by hand, or by another program) may predict, counts below 0 or not
    finite included.  Module-level, so its pickle loads by reference in the test's process."""

    kind = "scripted"

    def __init__(self, curve) -> None:
        self.curve = tuple(float(t) for t in curve)

    def spec(self) -> dict:
        return {"kind": self.kind}

    def fit(self, X, curves) -> ScriptedModel:
        return self

    def predict(self, f, workers):
        import numpy as np

        return np.asarray([self.curve[min(w, len(self.curve) - 1)] for w in workers], dtype=float)


def register_scripted_champion(registry, curves, curve) -> str:
    """Register, as the champion, a :class:`ScriptedModel` predicting ``curve``; returns its version."""
    from adlrec.predict.evaluate import cross_validate

    _, version = registry.register(ScriptedModel(curve), cross_validate({"kind": "analytic"}, curves), params={})
    registry.set_champion(version)
    return version


class NarrowModel(ScriptedModel):
    """A :class:`ScriptedModel` that raises on a probe of another device than the test probe's (cuda): as a model
    trained on GPU profiles alone, encoding the device kinds it saw, might (one registered by hand)."""

    kind = "narrow"

    def predict(self, f, workers):
        if f.device_kind != "cuda":
            raise ValueError(f"unknown device_kind {f.device_kind!r}: trained on cuda only")
        return super().predict(f, workers)


def register_narrow_champion(registry, curves, curve) -> str:
    """Register, as the champion, a :class:`NarrowModel` predicting ``curve``; returns its version."""
    from adlrec.predict.evaluate import cross_validate

    _, version = registry.register(NarrowModel(curve), cross_validate({"kind": "analytic"}, curves), params={})
    registry.set_champion(version)
    return version


class OneRowPyfunc:
    """An MLflow pyfunc another program registered under adlrec's model name: it answers one throughput
    whatever the number of rows asked.  adlrec's own wrapper always answers one per row."""

    def load_context(self, context) -> None:
        pass

    def predict(self, context, model_input, params=None):
        import pandas as pd

        return pd.DataFrame({"throughput": [100.0]})


def register_one_row_champion(registry) -> str:
    """Register, as the champion, a :class:`OneRowPyfunc` logged by plain MLflow; returns its version."""
    import mlflow
    import mlflow.pyfunc

    from adlrec.tracking import MODEL_NAME, _uris

    python_model = type("OneRow", (OneRowPyfunc, mlflow.pyfunc.PythonModel), {})
    with _uris(registry.tracking_uri), mlflow.start_run(experiment_id=registry.models.experiment_id()):
        info = mlflow.pyfunc.log_model(
            name="model", python_model=python_model(), pip_requirements=[], registered_model_name=MODEL_NAME
        )
    version = str(info.registered_model_version)
    registry.set_champion(version)
    return version
