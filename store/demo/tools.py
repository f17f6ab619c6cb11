"""The demo's local tools: deterministic, offline computations on synthetic data.

Log searches, file reads and service metrics are generated from a seed and the turn
number, so a run is reproducible; ``calculate`` evaluates plain arithmetic safely.
"""

from __future__ import annotations

import ast
import json
import operator
import random
from collections.abc import Callable

from pydantic import JsonValue

from strategies.messages import FunctionCallContent

__all__ = [
    "FILES",
    "SERVICES",
    "calculate",
    "get_metrics",
    "read_file",
    "rng_for",
    "run_tool",
    "search_logs",
]

SERVICES = ("checkout", "search", "billing", "auth", "inventory", "gateway")
FILES = ("app/server.py", "app/models.py", "app/jobs.py", "lib/cache.py", "lib/retry.py")
LEVELS = ("INFO", "WARN", "ERROR")
WORDS = (
    "request handled upstream timeout retry cache miss user order payment queue "
    "latency shard replica token session backoff deadline"
).split()


def rng_for(*parts: object) -> random.Random:
    """A random generator seeded by ``parts`` (stable across runs and platforms)."""
    return random.Random(":".join(str(p) for p in parts))


def search_logs(service: str, level: str, *, seed: int, turn: int) -> str:
    """Log lines of ``service`` for one turn; lines at ``level`` are the matches."""
    rng = rng_for(seed, turn, service, "logs")
    lines = []
    for i in range(rng.randint(30, 80)):
        lvl = rng.choices(LEVELS, weights=(6, 2, 2))[0]
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12)))
        lines.append(
            f"2026-11-29T10:{i % 60:02d}:{rng.randint(0, 59):02d}Z {lvl} {service} {words}"
        )
    matches = sum(1 for line in lines if f" {level} " in line)
    return "\n".join([f"{matches} of {len(lines)} lines at {level}", *lines])


def read_file(path: str, *, seed: int, turn: int) -> str:
    """A synthetic Python module at ``path``."""
    rng = rng_for(seed, turn, path, "file")
    lines = [f'"""{path}: generated for the demo."""', ""]
    for f in range(rng.randint(4, 10)):
        lines.append(f"def handler_{f}(request, retries={rng.randint(1, 5)}):")
        for _ in range(rng.randint(3, 9)):
            lines.append(
                f"    {rng.choice(WORDS)}_{rng.randint(0, 99)} = request.{rng.choice(WORDS)}"
            )
        lines.append(f"    return {rng.choice(WORDS)}")
        lines.append("")
    return "\n".join(lines)


def get_metrics(service: str, *, seed: int, turn: int) -> dict[str, JsonValue]:
    """Request count, error count and latency percentiles of ``service``."""
    rng = rng_for(seed, turn, service, "metrics")
    requests = rng.randint(10_000, 90_000)
    return {
        "service": service,
        "requests": requests,
        "errors": rng.randint(0, requests // 50),
        "p50_ms": rng.randint(8, 60),
        "p99_ms": rng.randint(120, 900),
    }


_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _eval(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    raise ValueError(f"unsupported expression: {ast.dump(node)}")


def calculate(expression: str) -> str:
    """Evaluate ``+ - * /`` arithmetic on numbers (nothing else)."""
    return f"{_eval(ast.parse(expression, mode='eval').body):.4g}"


def run_tool(call: FunctionCallContent, *, seed: int, turn: int) -> JsonValue:
    """Run the local tool ``call`` names, with its arguments."""
    args = (
        call.arguments if isinstance(call.arguments, dict) else json.loads(call.arguments or "{}")
    )
    if call.name == "search_logs":
        return search_logs(str(args["service"]), str(args["level"]), seed=seed, turn=turn)
    if call.name == "read_file":
        return read_file(str(args["path"]), seed=seed, turn=turn)
    if call.name == "get_metrics":
        return get_metrics(str(args["service"]), seed=seed, turn=turn)
    if call.name == "calculate":
        return calculate(str(args["expression"]))
    raise ValueError(f"unknown tool {call.name!r}")
