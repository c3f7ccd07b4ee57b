#!/usr/bin/env python3
"""Soak test of `ptn serve`: mixed concurrent load on loopback for a number of minutes.

Started by scripts/soak.sh. The server runs stories260K (context raised to 2048) with Qwen 3's
chat template and a small KV budget, so the cache fills and sequences are preempted. Workers send,
at random: plain and streamed completions and chats, streams cancelled mid-way, connections
dropped before the reply, long prompts near the context, structured output (json_schema), n > 1,
forced tool calls, the Responses, Anthropic Messages (streamed) and Ollama /api/chat (NDJSON) APIs,
embeddings, and bad requests. Every few seconds the server's RSS and /metrics are sampled.

At the end it checks, and exits 1 if any fails:
  - every request got the answer its kind expects (200, or 400 for a bad one; 503 only when the
    queue was full), every finished stream ended as its API ends one ([DONE], message_stop, done: true), every
    structured reply parses, responses hold a message and embeddings are finite vectors;
  - the server is alive (/health 200) and, once idle, holds no KV blocks and runs no sequence;
  - RSS is flat after the warm-up: in runs of 10 minutes or more the median of the last minute is
    within 5% of the median of minutes 4-6 (shorter runs: the last third within 25% + 16 MB of the
    first third's second half), medians because RSS moves by the requests in flight;
  - no more sequences run at once than --parallel (n > 1 requests count all their choices).
It writes a JSON summary (latency percentiles per kind, RSS and KV samples) to --out.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(ptn, tmp, kv_memory):
    hf = os.path.join(ROOT, "models/stories260K/hf")
    model = os.path.join(tmp, "hf")
    os.makedirs(model)
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(hf, f), model)
    with open(os.path.join(hf, "config.json")) as f:
        cfg = json.load(f)
    cfg["max_position_embeddings"] = 2048
    with open(os.path.join(model, "config.json"), "w") as f:
        json.dump(cfg, f)
    template = os.path.join(ROOT, "tests/data/chat/templates/Qwen-Qwen3.jinja")
    proc = subprocess.Popen([ptn, "serve", "-m", model, "--port", "0", "-t", "1", "--chat-template", template,
                             "--kv-memory", kv_memory, "--parallel", "8", "--max-queue", "64",
                             "--model-name", "stories"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    port = None
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "listening on http://" in line:
            port = int(line.rsplit(":", 1)[1].split("/")[0].strip())
            break
    if port is None:
        proc.kill()
        sys.exit("soak: the server did not start")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # drain its log
    return proc, port


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "unit"]}}}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                           "age": {"type": "integer"}}, "required": ["name", "age"]}
WORDS = "once upon a time there was a little girl named lily she loved to play outside in the park".split()


def request_for(kind, rng):
    """(path, body, expected status, stream?) for a kind of request."""
    chat = {"messages": [{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))}]}
    if kind == "completion":
        return "/v1/completions", {"prompt": "Once upon a time", "max_tokens": rng.randint(4, 48)}, 200, False
    if kind == "stream":
        return "/v1/completions", {"prompt": "Lily", "max_tokens": rng.randint(8, 64), "stream": True}, 200, True
    if kind == "chat_stream":
        return "/v1/chat/completions", dict(chat, max_tokens=rng.randint(4, 40), stream=True), 200, True
    if kind == "long_prompt":
        ids = [rng.randint(3, 500) for _ in range(rng.randint(1200, 1800))]
        return "/v1/completions", {"prompt": ids, "max_tokens": 16}, 200, False
    if kind == "json":
        return "/v1/chat/completions", dict(chat, max_tokens=80, logit_bias={"1": -100, "2": -100},
                                            response_format={"type": "json_schema",
                                                             "json_schema": {"name": "p", "schema": SCHEMA}}), 200, False
    if kind == "n3":
        return "/v1/completions", {"prompt": "The dog", "max_tokens": 12, "n": 3, "temperature": 1.0}, 200, False
    if kind == "tools":
        return "/v1/chat/completions", dict(chat, max_tokens=80, tools=WEATHER, parallel_tool_calls=False,
                                            tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                            logit_bias={"1": -100}), 200, False
    if kind == "responses":
        return "/v1/responses", {"input": chat["messages"][0]["content"], "max_output_tokens": rng.randint(4, 40)}, 200, False
    if kind == "messages":  # Anthropic's Messages API, streamed
        return "/v1/messages", dict(chat, model="stories", max_tokens=rng.randint(4, 40), stream=True), 200, True
    if kind == "ollama_chat":  # Ollama's /api/chat, NDJSON stream
        return "/api/chat", dict(chat, model="stories", options={"num_predict": rng.randint(4, 40)}), 200, True
    if kind == "embeddings":
        return "/v1/embeddings", {"input": [chat["messages"][0]["content"], "Lily"]}, 200, False
    if kind == "bad":
        return "/v1/completions", rng.choice([{"prompt": "x", "temperature": -3}, {"prompt": 7},
                                              {"prompt": "x", "bogus": 1}, {"messages": 3}]), 400, False
    raise ValueError(kind)


KINDS = ["completion", "stream", "chat_stream", "long_prompt", "json", "n3", "tools", "responses", "messages",
         "ollama_chat", "embeddings", "bad", "cancel", "disconnect"]


def stream_ended(kind, data):
    """Whether a finished stream of `kind` ended as its API says a stream ends."""
    if kind == "messages":
        return "event: message_stop" in data.rstrip().rsplit("\n\n", 1)[-1]
    if kind == "ollama_chat":
        lines = [l for l in data.splitlines() if l.strip()]
        return bool(lines) and json.loads(lines[-1]).get("done") is True
    return data.rstrip().endswith("data: [DONE]")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency = {k: [] for k in KINDS}
        self.failures = []
        self.counts = {k: 0 for k in KINDS}
        self.busy = 0

    def ok(self, kind, seconds):
        with self.lock:
            self.latency[kind].append(seconds)
            self.counts[kind] += 1

    def fail(self, kind, what):
        with self.lock:
            self.failures.append(f"{kind}: {what}")


def one_request(port, kind, rng, stats):
    t0 = time.time()
    if kind == "disconnect":  # send a request and go away before the answer
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 64}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(rng.random() * 0.05)
        s.close()
        stats.ok(kind, time.time() - t0)
        return
    path, body, want, stream = request_for("stream" if kind == "cancel" else kind, rng)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status == 503:
            r.read()
            with stats.lock:
                stats.busy += 1
            return
        if r.status != want:
            stats.fail(kind, f"status {r.status}: {r.read()[:300]!r}")
            return
        if kind == "cancel":  # read a little of the stream, then hang up
            r.read(rng.randint(1, 400))
            c.close()
            stats.ok(kind, time.time() - t0)
            return
        data = r.read().decode()
        if stream:
            if not stream_ended(kind, data):
                stats.fail(kind, f"stream not ended as its API says: {data[-200:]!r}")
                return
        elif want == 200:
            reply = json.loads(data)
            if kind == "json":
                ch = reply["choices"][0]
                if ch["finish_reason"] == "stop":
                    obj = json.loads(ch["message"]["content"])
                    if not isinstance(obj.get("name"), str) or not isinstance(obj.get("age"), int):
                        stats.fail(kind, f"reply does not follow the schema: {ch['message']['content']!r}")
                        return
            if kind == "n3" and len(reply["choices"]) != 3:
                stats.fail(kind, f"{len(reply['choices'])} choices")
                return
            if kind == "responses" and (reply.get("object") != "response" or not any(
                    o.get("type") == "message" for o in reply.get("output", []))):
                stats.fail(kind, f"no message in the response: {reply!r}"[:300])
                return
            if kind == "embeddings" and (len(reply["data"]) != 2 or any(
                    len(d["embedding"]) == 0 or not all(abs(x) < 1e30 for x in d["embedding"]) for d in reply["data"])):
                stats.fail(kind, f"bad embeddings: {data[:300]!r}")
                return
            if kind == "tools":
                calls = reply["choices"][0]["message"].get("tool_calls") or []
                if reply["choices"][0]["finish_reason"] == "tool_calls" and (
                        len(calls) != 1 or not isinstance(json.loads(calls[0]["function"]["arguments"]), dict)):
                    stats.fail(kind, f"bad tool call: {reply!r}"[:300])
                    return
        stats.ok(kind, time.time() - t0)
    except (OSError, http.client.HTTPException, json.JSONDecodeError, KeyError) as e:
        stats.fail(kind, f"{type(e).__name__}: {e}")
    finally:
        c.close()


def rss_problem(samples, minutes):
    """The leak check on the RSS samples: None when flat. Medians, not single samples: RSS moves
    by a few MB with the requests in flight, which on this tiny model is more than 5%."""
    import statistics
    if not samples:
        return "no RSS samples"
    if minutes >= 10:  # the rule: flat after warm-up, within 5% of its value at minute 5
        base = [x["rss_kb"] for x in samples if 240 <= x["t"] <= 360]
        last = [x["rss_kb"] for x in samples if x["t"] >= minutes * 60 - 60]
        limit = 1.05
        where = "minutes 4-6"
    else:  # a short run has no plateau yet: within 25% + 16 MB of its first third
        third = minutes * 60 / 3
        base = [x["rss_kb"] for x in samples if third / 2 <= x["t"] <= third]
        last = [x["rss_kb"] for x in samples if x["t"] >= 2 * third]
        limit = None
        where = "the first third"
    if not base or not last:
        return None
    b, e = statistics.median(base), statistics.median(last)
    bound = b * limit if limit else b * 1.25 + 16 * 1024
    if e > bound:
        return f"RSS grew: median {int(e)} kB in the last part against {int(b)} kB in {where} (bound {int(bound)})"
    return None


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptn")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--kv-memory", default="3M")
    ap.add_argument("--out", default="soak-summary.json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", metavar="SUMMARY", help="only re-run the RSS check on a summary file")
    a = ap.parse_args()
    if a.check:
        with open(a.check) as f:
            saved = json.load(f)
        rp = rss_problem(saved["samples"], saved["minutes"])
        print("soak: RSS", rp or "flat")
        sys.exit(1 if rp else 0)
    tmp = tempfile.mkdtemp(prefix="ptn-soak-")
    proc, port = start_server(a.ptn, tmp, a.kv_memory)
    stats = Stats()
    stop = threading.Event()
    samples = []

    def worker(i):
        rng = random.Random(a.seed * 1000 + i)
        while not stop.is_set():
            one_request(port, rng.choice(KINDS), rng, stats)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(a.workers)]
    t_start = time.time()
    for t in threads:
        t.start()
    warm_at = 300.0 if a.minutes >= 10 else a.minutes * 60 / 3  # for the summary line
    warm_rss = None
    end = t_start + a.minutes * 60
    while time.time() < end and proc.poll() is None:
        time.sleep(min(5.0, max(0.1, end - time.time())))
        try:
            m = metrics(port)
        except OSError as e:
            stats.fail("metrics", str(e))
            continue
        elapsed = time.time() - t_start
        samples.append({"t": round(elapsed, 1), "rss_kb": rss_kb(proc.pid),
                        "kv_blocks_used": m.get("ptn_kv_blocks_used"), "running": m.get("ptn_running_sequences"),
                        "queue": m.get("ptn_queue_length"), "preemptions": m.get("ptn_preemptions_total")})
        if (samples[-1]["running"] or 0) > 8:
            stats.fail("metrics", f"{samples[-1]['running']} sequences running with --parallel 8")
        if warm_rss is None and elapsed >= warm_at:
            warm_rss = samples[-1]["rss_kb"]
    stop.set()
    for t in threads:
        t.join(timeout=180)
    problems = list(stats.failures)
    if proc.poll() is not None:
        problems.append(f"the server exited with {proc.returncode}")
    else:
        # Idle: every sequence ends and every block returns (the prefix cache may keep some as cached).
        idle = None
        for _ in range(100):
            idle = metrics(port)
            if idle.get("ptn_kv_blocks_used") == 0 and idle.get("ptn_running_sequences") == 0:
                break
            time.sleep(0.1)
        if idle.get("ptn_kv_blocks_used") != 0 or idle.get("ptn_running_sequences") != 0:
            problems.append(f"not idle after the load: {idle}")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/health")
        if c.getresponse().status != 200:
            problems.append("/health is not 200")
        c.close()
        rp = rss_problem(samples, a.minutes)
        if rp:
            problems.append(rp)
    summary = {
        "minutes": a.minutes, "workers": a.workers, "kv_memory": a.kv_memory,
        "requests": stats.counts, "busy_503": stats.busy,
        "latency_s": {k: {"p50": percentile(v, 50), "p95": percentile(v, 95), "max": percentile(v, 100)}
                      for k, v in stats.latency.items()},
        "rss_kb_after_warmup": warm_rss, "rss_kb_end": samples[-1]["rss_kb"] if samples else None,
        "preemptions": samples[-1]["preemptions"] if samples else None,
        "samples": samples, "problems": problems,
    }
    with open(a.out, "w") as f:
        json.dump(summary, f, indent=1)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
        if rc != 0:
            problems.append(f"exit status {rc} after SIGTERM")
    except subprocess.TimeoutExpired:
        proc.kill()
        problems.append("no exit 30 s after SIGTERM")
    shutil.rmtree(tmp, ignore_errors=True)
    total = sum(stats.counts.values())
    print(f"soak: {a.minutes} min, {total} requests ({', '.join(f'{k} {n}' for k, n in stats.counts.items())}), "
          f"{stats.busy} x 503, preemptions {summary['preemptions']}, RSS {warm_rss} -> {summary['rss_kb_end']} kB")
    for p in problems[:20]:
        print("soak: PROBLEM", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
