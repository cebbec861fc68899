"""Ray Serve for real: a local Ray cluster, two replicas of the shipped INT8 variant, a replica killed under
load, the app on top (remote engine, the page as a deployment), a replica that cannot load, and the
deployment files checked against Ray's own config schema.

Needs the `serve` extra (ray[serve]); skipped without it. Bounded: one local cluster for the module (2 CPUs,
a 100 MB object store, no dashboard), 1.5 to 2.5 minutes on 2 busy cores, shut down in the fixture's
teardown.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

ray = pytest.importorskip("ray", reason="Ray Serve is the optional `serve` extra: pip install -e '.[serve]'")
serve = pytest.importorskip("ray.serve", reason="Ray Serve is the optional `serve` extra: pip install -e '.[serve]'")

from gradio_client import Client  # noqa: E402
from ray.serve.schema import ServeDeploySchema  # noqa: E402

import app as app_py  # noqa: E402
from ui.cards import cards_html  # noqa: E402
from variants.benchmarking.ray_bench import INT8, run_load, sample_requests  # noqa: E402
from variants.core import config  # noqa: E402
from variants.core import spec as specs  # noqa: E402
from variants.serving import ray_serve  # noqa: E402
from variants.serving.engine import load_engine  # noqa: E402
from variants.serving.guard import MAX_WAITING  # noqa: E402
from variants.serving.remote import AnswerClient, RemoteError  # noqa: E402
from variants.serving.remote_engine import remote_engine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ray-cache")


@pytest.fixture(scope="module")
def reference(cache_dir: Path) -> tuple[list[tuple[str, str]], list]:
    """64 requests of mixed lengths and the in-process engine's answers (one thread, as each replica has);
    building the INT8 variant here fills the cache the replicas then load from."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(config.THREADS_ENV, "1")
        spec = next(s for s in specs.preset("embedded", "cpu") if s.name == INT8)
        engine = load_engine(variant_specs=[spec], device="cpu", fallback=False, cache_dir=cache_dir)
    assert engine.variants[INT8].ok, engine.variants[INT8].error
    requests = sample_requests(64)
    return requests, [engine.answer_one(INT8, q, c) for q, c in requests]


@pytest.fixture(scope="module")
def cluster():
    port = free_port()
    ray_serve.start(num_cpus=2, port=port)
    try:
        yield port
    finally:
        ray_serve.stop()


def replica_names(client: AnswerClient, want: int, timeout_s: float = 60) -> set[str]:
    """The replicas' actor names, asking until ``want`` different ones have answered."""
    names: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while len(names) < want and time.monotonic() < deadline:
        names |= {v["replica"]["actor"] for v in client.variants()}
    return names


@pytest.mark.slow
def test_two_replicas_answer_as_the_engine_and_survive_a_killed_replica(reference, cluster, cache_dir) -> None:
    requests, expected = reference
    lengths = sorted(len(c) for _, c in requests)
    assert lengths[-1] > 4 * lengths[0], "the requests should mix short and long contexts"
    options = ray_serve.VariantOptions(variant=INT8, cache_dir=str(cache_dir))
    routes = ray_serve.deploy([options], replicas=2, num_cpus=1)
    assert routes == {INT8: f"/{INT8}"}
    client = AnswerClient(f"http://127.0.0.1:{cluster}{routes[INT8]}", retries=8)
    before = replica_names(client, 2)
    assert len(before) == 2, f"two replicas should answer, saw {before}"
    victim = sorted(before)[0]
    killed = threading.Event()

    def kill_mid_load(done: int) -> None:  # after the 8th answer: the other 56 are in flight
        if done >= 8 and not killed.is_set():
            killed.set()
            ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)

    answered, lock = [0], threading.Lock()

    def count(_i: int) -> None:
        with lock:
            answered[0] += 1
            done = answered[0]
        kill_mid_load(done)

    load = run_load(client, requests, concurrency=64, after=count)  # all 64 at once
    assert killed.is_set()
    assert load["errors"] == [], load["errors"][:3]
    replies = load["replies"]
    assert all(r is not None for r in replies), "a request was lost"
    for (q, _c), reply, want in zip(requests, replies, expected, strict=True):
        assert (reply["answer"], reply["start"], reply["end"]) == (want.answer, want.start, want.end), q
        assert reply["score"] == pytest.approx(want.score, abs=1e-3), q
        assert (reply["device"], reply["dtype"]) == ("cpu", "int8")
    print(f"retried after the kill: {sum(r['retried'] for r in replies)} of {len(replies)} requests")

    # Serve replaces the killed replica: two replicas answer again, the victim not among them.
    deadline = time.monotonic() + 240  # a replica loads its model first: minutes on 2 busy cores
    after: set[str] = set()
    while time.monotonic() < deadline:
        after = replica_names(client, 2, timeout_s=5)
        if len(after) == 2 and victim not in after:
            break
        time.sleep(1)
    assert len(after) == 2 and victim not in after, f"no replacement replica: {after} (killed {victim})"

    # Bad input is refused with the engine's message, not retried and not a 500.
    with pytest.raises(RemoteError, match="Please type a question") as refused:
        client.answer("", "Paris is the capital of France.")
    assert refused.value.status == 422
    with pytest.raises(RemoteError, match="too long") as too_long:  # found only while tokenizing, in the batch
        client.answer("? " * 499, "Paris is the capital of France.")
    assert too_long.value.status == 422
    # The same response as the in-process route: what was timed, and timed runs when asked for (then alone)
    url = f"http://127.0.0.1:{cluster}{routes[INT8]}/v1/answer"
    (question, context), want = requests[0], expected[0]
    # A body over the limit is refused before it is read, as on /v1 (the app's edge is in front of every route)
    big = b'{"question": "q", "context": "' + b"a" * 2_000_000 + b'"}'
    too_big = httpx.post(url, content=big, headers={"content-type": "application/json"}, timeout=60)
    assert too_big.status_code == 413 and len(too_big.content) < 200, too_big.text[:200]
    served = httpx.post(url, json={"question": question, "context": context}, timeout=60).json()
    assert served["timed_runs"] == 1 and served["timing"].startswith("1 timed run")  # INT8: never in a batch
    timed = httpx.post(url, json={"question": question, "context": context, "runs": 3, "warmup": True}, timeout=60)
    assert timed.status_code == 200, timed.text
    body = timed.json()
    assert body["timed_runs"] == 3 and body["latency_min_ms"] <= body["latency_ms"] <= body["latency_max_ms"]
    assert (body["answer"], body["start"]) == (want.answer, want.start) and "warm-up" in body["timing"]

    # The app on top (python app.py --backend URL): the same answers on the same cards, which say where they ran;
    # a variant the backend does not serve says so on its card.
    engine = remote_engine(f"http://127.0.0.1:{cluster}", "embedded", "cpu", names=["baseline", INT8])
    results = {r.variant: r for r in engine.ask(question, context, repeats=3)}
    got = results[INT8]
    assert (got.answer, got.start, got.end, got.dtype) == (want.answer, want.start, want.end, "int8")
    assert len(got.latency_runs) == 3 and got.latency_min_ms <= got.latency_ms <= got.latency_max_ms
    assert results["baseline"].error.startswith(f"Not served at http://127.0.0.1:{cluster}/baseline")
    html = cards_html(engine.snapshot(results), ["baseline", INT8], context)
    assert f"Answered by Ray Serve at http://127.0.0.1:{cluster}/{INT8}" in html
    assert "8-bit integers" in html
    engine.close()

    # The page itself as a Serve deployment (app.py --demo-replicas 1) over the same backend: its /answer API and
    # its lean route answer through the INT8 replicas.
    backend = f"http://127.0.0.1:{cluster}"
    argv = ["--backend", backend, "--preset", "embedded", "--variants", INT8]
    # num_cpus=0: the two INT8 replicas hold the cluster's 2 CPUs, and a replica that cannot be placed waits forever
    route = ray_serve.deploy_demo(functools.partial(app_py.backend_app, argv), replicas=1, num_cpus=0)
    page = Client(f"{backend}{route}/", verbose=False).predict(context, question, api_name="/answer")
    assert [(r["variant"], r["answer"], r["start"]) for r in page] == [(INT8, want.answer, want.start)]
    with AnswerClient(f"{backend}{route}") as lean:
        assert lean.answer(question, context)["answer"] == want.answer
    serve.delete("demo")
    serve.delete(INT8)


@pytest.mark.slow
def test_a_replica_that_cannot_load_says_why(cluster, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    options = ray_serve.VariantOptions(variant=INT8, pruned=str(missing), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ray_serve.VariantLoadError) as failed:
        ray_serve.deploy([options], replicas=1, num_cpus=0, constructor_retries=1)
    message = str(failed.value)
    assert message.startswith(f"{INT8} failed to load: The folder"), message
    assert str(missing) in message and "\n" not in message, message
    status = serve.status().applications[INT8]
    assert status.status == "DEPLOY_FAILED"
    assert str(missing) in status.deployments[ray_serve.DEPLOYMENT].message  # Serve's own status says it too
    serve.delete(INT8)


# --- the deployment files, against Ray's own schema (no cluster needed) -----------------------------------


def serve_configs() -> list[tuple[str, dict]]:
    """(where, Serve config) for the Serve config file and each RayService manifest's serveConfigV2."""
    found = [("serve-config.yaml", yaml.safe_load((DEPLOY / "serve-config.yaml").read_text()))]
    for manifest in sorted(DEPLOY.glob("rayservice-*.yaml")):
        service = yaml.safe_load(manifest.read_text())
        found.append((manifest.name, yaml.safe_load(service["spec"]["serveConfigV2"])))
    return found


@pytest.mark.parametrize("where,data", serve_configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_deployment_files_pass_rays_serve_schema_and_build(where: str, data: dict) -> None:
    schema = ServeDeploySchema.model_validate(data)
    assert schema.applications, where
    for app in schema.applications:
        module, _, builder = app.import_path.partition(":")
        assert module == "variants.serving.ray_serve" and builder == "build_app", app.import_path
        application = ray_serve.build_app(app.args)  # the args the file passes build an application
        assert ray_serve.VariantOptions(**app.args).spec().name == app.args["variant"]  # a variant of its preset
        assert isinstance(application, serve.Application)
        assert app.route_prefix == ray_serve.route(app.args["variant"])
        for deployment in app.deployments:
            assert deployment.name == ray_serve.DEPLOYMENT


def test_rayservice_manifests_have_head_cpu_and_gpu_workers() -> None:
    manifests = {p.name: yaml.safe_load(p.read_text()) for p in sorted(DEPLOY.glob("rayservice-*.yaml"))}
    assert set(manifests) == {"rayservice-cpu.yaml", "rayservice-gpu.yaml"}
    for name, service in manifests.items():
        assert (service["apiVersion"], service["kind"]) == ("ray.io/v1", "RayService"), name
        cluster = service["spec"]["rayClusterConfig"]
        assert cluster["headGroupSpec"]["rayStartParams"].get("num-cpus") == "0", "the head schedules no replicas"
        groups = cluster["workerGroupSpecs"]
        assert groups and all(g["template"]["spec"]["containers"] for g in groups), name
    gpu = manifests["rayservice-gpu.yaml"]["spec"]
    limits = [
        c["resources"]["limits"]
        for g in gpu["rayClusterConfig"]["workerGroupSpecs"]
        for c in g["template"]["spec"]["containers"]
    ]
    assert any("nvidia.com/gpu" in limit for limit in limits)
    apps = {a["name"]: a for a in yaml.safe_load(gpu["serveConfigV2"])["applications"]}
    fp16 = apps["pruned-onnx-opt-fp16"]
    share = fp16["deployments"][0]["ray_actor_options"]["num_gpus"]
    assert 0 < share < 1 and fp16["args"]["device"] == "cuda", "the GPU variant's replicas share a GPU"


def test_the_line_past_the_replicas_is_bounded_as_v1s() -> None:
    assert ray_serve.VariantDeployment.max_queued_requests == MAX_WAITING


def test_build_app_refuses_unknown_args() -> None:
    with pytest.raises(ValueError, match="unknown args"):
        ray_serve.build_app({"variant": INT8, "replica": 2})


def test_serve_command_refuses_before_starting_a_cluster(capsys: pytest.CaptureFixture) -> None:
    from variants.cli import serve_main  # noqa: PLC0415

    with pytest.raises(SystemExit):
        serve_main(["--preset", "embedded"])  # no --ray
    assert "say --ray" in capsys.readouterr().err
    assert serve_main(["--ray", "--preset", "embedded", "--variants", "nope"]) == 2
    assert "no variant 'nope' in preset 'embedded'" in capsys.readouterr().err  # checked before Ray starts
