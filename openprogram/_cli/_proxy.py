"""``openprogram proxy``: a local base URL for Anthropic and OpenAI clients
(``pip install 'openprogram[proxy]'``)."""

from __future__ import annotations

import argparse
import secrets
import sys

from openprogram._cli._common import UsageError, common_options, errors, token_budget
from openprogram._cli._view import _loopback


def cmd_proxy(args: argparse.Namespace) -> int:
    try:
        import httpx  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise UsageError(
            f"the proxy needs {error.name}: pip install 'openprogram[proxy]'"
        ) from error
    from openprogram.proxy import Proxy, ProxyConfig, bind, env_lines, serve, url_of

    for name in ("upstream_anthropic", "upstream_openai"):
        url = getattr(args, name)
        if not url.startswith(("http://", "https://")):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} {url!r} is not an http(s) URL")
    config = ProxyConfig(
        db=getattr(args, "db", None),
        state_dir=getattr(args, "state_dir", None),
        budget=args.budget,
        policy=args.policy,
        upstream_anthropic=args.upstream_anthropic,
        upstream_openai=args.upstream_openai,
        redact=args.redact,
        summary_wait=args.summary_wait,
        summarizer_model=args.summarizer_model,
        history_tools=args.history_tools,
    )
    try:
        sock = bind(args.host, args.port)
    except OSError as error:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {error.strerror}") from error
    host, port = sock.getsockname()[:2]
    if not _loopback(host):
        errors.print(
            f"[yellow]warning:[/] listening on {host}, not loopback: whoever can reach it and "
            "holds the token sends requests through it"
        )
    try:
        proxy = Proxy(config)
    except BaseException:
        sock.close()  # a database it cannot open leaves no socket listening
        raise
    token = secrets.token_urlsafe(24)
    for line in env_lines(url_of(host, port), token):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    try:
        serve(proxy, sock, token=token)
    finally:
        proxy.close()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    proxy = sub.add_parser(
        "proxy",
        parents=[common_options()],
        help="a local base URL: Anthropic and OpenAI clients get compacted prompts",
    )
    proxy.add_argument("--host", default="127.0.0.1", help="the address to listen on (loopback)")
    proxy.add_argument("--port", type=int, default=8787, help="the port (0: any free one)")
    proxy.add_argument("--budget", type=token_budget, help="each prompt's token budget")
    proxy.add_argument(
        "--policy", default="claude-code", choices=["claude-code", "progressive"],
        help="the compaction preset of new sessions",
    )  # fmt: skip
    proxy.add_argument(
        "--upstream-anthropic", default="https://api.anthropic.com",
        help="where Anthropic Messages requests go",
    )  # fmt: skip
    proxy.add_argument(
        "--upstream-openai", default="https://api.openai.com",
        help="where OpenAI requests go (the proxy keeps the /v1/… path)",
    )  # fmt: skip
    proxy.add_argument(
        "--redact", action="store_true",
        help="redact secrets in everything stored (summaries are always redacted)",
    )  # fmt: skip
    proxy.add_argument(
        "--summary-wait", default="always", choices=["always", "never"],
        help="never: no request waits for a summary (it goes out with the cheaper tiers, "
        "still within the budget, and the next one adopts the summary)",
    )  # fmt: skip
    proxy.add_argument(
        "--summarizer-model", metavar="MODEL",
        help="a litellm model for summaries, cheaper than the agent's (its key from the "
        "proxy's environment; default: offline summaries)",
    )  # fmt: skip
    proxy.add_argument(
        "--no-history-tools", dest="history_tools", action="store_false",
        help="do not offer the history tools upstream (the proxy answers them otherwise)",
    )  # fmt: skip
    proxy.set_defaults(run=cmd_proxy)
