"""`adlrec model fit|list` and `adlrec predict`."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from adlrec.cli.common import (
    job_output_to_stderr,
    open_tracker,
    seconds,
    settings_from,
    stdout,
    store_args,
    store_exists,
    store_source,
    worker_count,
)
from adlrec.cli.profile import datasets_folder, job_and_device, log_or_keep, profile_tracker, sweep
from adlrec.errors import TrackingError, UsageError, first_line
from adlrec.words import count

__all__ = ["add_commands"]


def add_commands(sub) -> None:
    m = sub.add_parser(
        "model",
        help="fit and inspect the throughput model in the MLflow Model Registry",
        description="Fit the throughput model that `adlrec predict` uses on the measured curves and register it "
        "as adlrec-throughput in the MLflow Model Registry, or list its versions.",
    )
    ms = m.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    fit = ms.add_parser(
        "fit",
        help="cross-validate, fit on all curves, register a version of adlrec-throughput",
        description="Evaluate by leave-one-workload-out cross validation over the curves in --profiles and in "
        "the MLflow store, fit on all of them, log the fit as a run and register a new version of "
        "adlrec-throughput. The champion alias moves to it only if it beats the current champion's spec "
        "on the same evaluation.",
    )
    fit.add_argument(
        "--kind", choices=["learned", "analytic", "interp"], default="learned", help="model kind (default learned)"
    )
    fit.add_argument(
        "--hparam",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hyperparameter of the learned model, e.g. max_depth=4",
    )
    fit.add_argument(
        "--profiles",
        type=Path,
        default=None,
        help="folder of exported profiles to train on too (default profiles/, when there is one)",
    )
    store_args(fit, what="MLflow experiment of the profiles to train on")
    lst = ms.add_parser(
        "list",
        help="list registered versions and the champion",
        description="List the versions of adlrec-throughput in the MLflow Model Registry: each one's spec and "
        "cross-validated median APE, and which one is @champion.",
    )
    store_args(lst, experiment=None)  # the registry is in no experiment

    pr = sub.add_parser(
        "predict",
        help="probe a model.py briefly and predict its whole throughput curve",
        description="Run a short probe (at most a quarter of a full sweep's budget), load "
        "models:/adlrec-throughput@champion (the analytic model when none is registered), and print the "
        "predicted curve, its maximum and the fewest workers reaching 95% of it.",
    )
    pr.add_argument("model_py", type=Path, help="the job: a model.py that follows the adlrec contract")
    pr.add_argument(
        "--max-workers",
        type=worker_count,
        default=None,
        help="largest worker count to predict (default: cores + 2, at most 16)",
    )
    pr.add_argument("--device", default="auto", help="auto | cpu | cuda | emulate:MS; default auto")
    pr.add_argument(
        "--budget",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="a full sweep's budget per worker count; the probe gets a quarter of the sweep (default 6)",
    )
    pr.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one of model.py's PARAMS (repeatable)",
    )
    pr.add_argument("--compare", action="store_true", help="also run the full sweep and print predicted vs measured")
    pr.add_argument("--no-log", action="store_true", help="with --compare: do not log the sweep to MLflow")
    pr.add_argument("--json", action="store_true", help="print JSON instead of tables")
    store_args(pr, what="MLflow experiment --compare logs its sweep to")
    m.set_defaults(handler=_cmd_model)
    pr.set_defaults(handler=_cmd_predict)


def _parse_hparams(items: Sequence[str]) -> dict:
    from adlrec.predict.models import LearnedModel

    defaults = LearnedModel().spec()
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or key not in defaults or key == "kind":
            known = ", ".join(k for k in defaults if k != "kind")
            raise UsageError(f"--hparam {item!r}: expected KEY=VALUE with KEY one of {known}")
        try:
            out[key] = type(defaults[key])(raw)
        except ValueError:
            raise UsageError(f"--hparam {item!r}: {raw!r} is not a valid {type(defaults[key]).__name__}") from None
    try:
        LearnedModel(**out)  # the ranges, before anything is trained or registered
    except ValueError as exc:
        raise UsageError(f"--hparam {exc}") from None
    return out


def _fit_flags(args: argparse.Namespace) -> tuple[dict, Path | None]:
    """The spec to fit and the profiles folder, from ``model fit``'s flags; a mistake is a UsageError."""
    if args.kind != "learned" and args.hparam:
        raise UsageError("--hparam applies to --kind learned only")
    spec = {"kind": args.kind} | _parse_hparams(args.hparam)
    if args.kind == "learned":
        from adlrec.predict.models import LearnedModel

        spec = LearnedModel(**{k: v for k, v in spec.items() if k != "kind"}).spec()
    folder = args.profiles
    if folder is None:
        folder = Path("profiles") if Path("profiles").is_dir() else None
    elif folder.exists() and not folder.is_dir():
        raise UsageError(f"--profiles {folder}: a file, not a folder; expected a folder of exported profiles")
    elif not folder.is_dir():
        raise UsageError(f"--profiles {folder}: no such folder; expected a folder of exported profiles")
    return spec, folder


def _skipped_summary(skipped: Sequence[str]) -> str:
    """``skipped 5 profiles: 5 swept to fewer than 2 workers (...)``, the commonest reasons first."""
    if not skipped:
        return ""
    counts = Counter(skipped).most_common()
    reasons = "; ".join(f"{n} {why}" if n > 1 else why for why, n in counts[:3])
    more = f"; and {len(counts) - 3} other reasons" if len(counts) > 3 else ""
    return f"skipped {len(skipped)} profile{'s' if len(skipped) > 1 else ''}: {reasons}{more}"


def _cmd_model(args: argparse.Namespace) -> int:
    from adlrec.tracking import MODEL_NAME, ModelRegistry

    if args.model_command == "list":
        return _list_versions(args)
    spec, folder = _fit_flags(args)  # before the store is opened: a mistyped flag creates no store
    settings = settings_from(args)
    uri = settings.resolved_tracking_uri
    # A store that is not there holds no curves: it is created to register a fit, not for a fit that cannot
    # run (a mistyped --tracking-uri left an empty store at the typo beside "found 0 curves").
    tracker = open_tracker(settings, args) if store_exists(args, settings, reading=False) else None
    console = stdout()

    from adlrec.predict.fit import fit_and_register, gather_curves
    from adlrec.predict.report import fit_table

    skipped: list[str] = []
    curves = gather_curves(folder, tracker, skipped)
    where = f"{folder}/ and {uri}" if folder else uri
    why = _skipped_summary(skipped)
    workloads = {c.group for c in curves}
    if len(workloads) < 2:
        raise UsageError(
            f"need curves of at least 2 workloads to cross-validate; found {count(len(curves), 'curve')} of "
            f"{count(len(workloads), 'workload')} in {where}" + (f"; {why}" if why else "")
        )
    if why:
        print(f"adlrec: {why}", file=sys.stderr)
    registry = ModelRegistry(uri, settings.artifact_root, store_source(args))
    outcome = fit_and_register(curves, spec, registry, sources=where)
    console.print(fit_table(outcome))
    if outcome.promoted:
        before = f" (was v{outcome.previous_champion})" if outcome.previous_champion else ""
        if outcome.champion_broken:
            before = f" (was v{outcome.previous_champion}, {outcome.champion_broken})"
        console.print(f"registered {MODEL_NAME} v{outcome.version} and moved @champion to it{before}", markup=False)
    else:
        console.print(
            f"registered {MODEL_NAME} v{outcome.version}, but it does not beat champion v{outcome.previous_champion} "
            f"on the same evaluation (median APE {outcome.evaluation.median_ape:.1%} vs "
            f"{outcome.champion_evaluation.median_ape:.1%}); @champion stays on v{outcome.previous_champion}"
        )
    console.print(
        f"fit run {outcome.run_id} in experiment 'adlrec-models' at {settings.resolved_tracking_uri}", markup=False
    )
    return 0


def _list_versions(args: argparse.Namespace) -> int:
    from adlrec.tracking import MODEL_NAME, ModelRegistry, check_server, prompt_reads

    settings = settings_from(args)
    uri = settings.resolved_tracking_uri
    if not store_exists(args, settings, reading=True):  # the default store, before anything was logged
        print(f"no versions of {MODEL_NAME} yet in {uri}; `adlrec model fit` registers one")
        return 0
    check_server(uri, store_source(args))
    registry = ModelRegistry(uri, settings.artifact_root, store_source(args))
    with prompt_reads():
        versions = registry.versions()
        champion = registry.champion()
    if not versions:
        print(f"no versions of {MODEL_NAME} in {uri}")
    console = stdout()
    for mv in versions:
        mark = "  champion" if champion and champion.version == str(mv.version) else ""
        try:
            ape_text = f"{float(mv.tags['cv_median_ape']):.1%}"
        except (KeyError, ValueError):  # a version adlrec did not register
            ape_text = "?"
        spec = mv.tags.get("adlrec.spec") or "(no adlrec.spec: not registered by adlrec)"
        console.print(f"v{mv.version}  {spec}  cv median APE {ape_text}{mark}", markup=False)
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import numpy as np

    from adlrec.job import check_job_file
    from adlrec.predict.models import AnalyticModel, as_throughputs, smallest_reaching
    from adlrec.predict.probe import probe_job, sweep_budget
    from adlrec.predict.report import prediction_line, prediction_table, sweep_line
    from adlrec.profile.hardware import detect_hardware
    from adlrec.profile.sweep import default_max_workers
    from adlrec.schemas import json_text
    from adlrec.tracking import MODEL_NAME, ModelRegistry, check_server, predict_throughputs, prompt_reads

    if args.no_log and not args.compare:
        raise UsageError("--no-log applies to --compare only (without it, predict logs nothing)")
    if args.experiment is not None and (args.no_log or not args.compare):
        raise UsageError(
            "--experiment applies to --compare only, which logs its sweep there; without --compare, or with "
            "--no-log, predict logs nothing (the registered model it reads is in no experiment)"
        )
    settings = settings_from(args, point_budget_s=args.budget)
    check_server(settings.resolved_tracking_uri, store_source(args))  # before the probe, not after it
    check_job_file(args.model_py)  # the arguments before the store
    # only a --compare that logs its sweep writes: anything else leaves a store that is not there uncreated
    stored = store_exists(args, settings, reading=not args.compare or args.no_log)
    with job_output_to_stderr(args.json):  # stdout is the JSON alone, whatever model.py prints
        job, device = job_and_device(args, settings)
        with datasets_folder(settings):  # a job that fails leaves no empty datasets folder
            tracker = profile_tracker(args, settings) if args.compare else None
            hardware = detect_hardware()
            max_w = args.max_workers if args.max_workers is not None else default_max_workers(hardware.logical_cores)
            loaded = None
            if stored or tracker is not None:
                registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root, store_source(args))
                with prompt_reads():  # a server that fails is an error, not "no registered model"
                    loaded = registry.load() if registry.champion() else None
            if loaded is None:
                print(
                    f"adlrec: no registered model {MODEL_NAME}@champion in {settings.resolved_tracking_uri}; "
                    "predicting with the analytic model",
                    file=sys.stderr,
                )
            probe = probe_job(job, device, settings, hardware, max_w)
            workers = list(range(max_w + 1))
            if loaded is None:
                curve = AnalyticModel().predict(probe.features, workers)
                source = "analytic model (no registered model)"
            else:
                pyfunc, version = loaded
                try:  # it predicted the test probe when loaded; this job's it may not (a model adlrec did not fit)
                    curve = predict_throughputs(pyfunc, probe.features.to_dict(), workers)
                except Exception as exc:
                    raise TrackingError(
                        f"{MODEL_NAME} v{version} (@champion) in {settings.resolved_tracking_uri} cannot predict "
                        f"this job's probe: {type(exc).__name__}: {first_line(exc)}; `adlrec model fit` registers a "
                        "new version and moves @champion to it"
                    ) from exc
                curve = as_throughputs(curve)  # as the service reads it
                source = f"{MODEL_NAME}@champion (v{version})"
            best_w = int(np.argmax(curve))
            enough_w = smallest_reaching(curve)
            measured = None
            sweep_s = None
            if args.compare:
                import time

                t0 = time.perf_counter()
                profile = sweep(args, job, device, settings, hardware)
                sweep_s = time.perf_counter() - t0
                measured = [p.throughput for p in profile.points]
                if tracker is not None:
                    log_or_keep(tracker, profile, settings)
    summary = {
        "workload": job.name,
        "device": device.label,
        "model": source,
        "probe": probe.features.to_dict(),
        "probe_seconds": probe.seconds,
        "probe_budget_share": 4 * probe.part_budget_s / sweep_budget(settings.point_budget_s, max_w),
        "predicted": [float(t) for t in curve],
        "predicted_max": float(curve[best_w]),
        "predicted_best_workers": best_w,
        "workers_for_95pct": enough_w,
        "measured": measured,
        "sweep_seconds": sweep_s,
    }
    if args.json:
        print(json_text(summary))
        return 0
    console = stdout()
    console.print(prediction_table(job.name, device, curve, measured))
    console.print(f"model: {source}", markup=False)
    console.print(prediction_line(curve, best_w, enough_w))
    line = f"probe: {probe.seconds:.1f} s"
    if sweep_s is not None:
        line += f"; full sweep: {sweep_s:.1f} s ({probe.seconds / sweep_s:.0%} of it); {sweep_line(curve, measured, best_w)}"
    console.print(line)
    return 0
