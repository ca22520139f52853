from eviscene_tui.scaffold.fake_vllm.hints import LEAKY, POOL, DemoHintServer, propose
from eviscene_tui.gate.bundled.audit import audit_hint
from eviscene_tui.gate.bundled.hints import build_prompt, fetch_hints


def _body(fb, count=3):
    return {"messages": build_prompt(feedback=fb, site={}, public_context={}, failure_step={}, count=count)}


def test_propose_follows_the_feedback_rules():
    assert propose(_body({})) == [LEAKY, POOL[0], POOL[1]]
    assert propose(_body({"excluded_hints": [POOL[0]]}, count=2)) == [LEAKY, POOL[1]]
    locked = propose(_body({"locked_hint": POOL[0], "excluded_hints": [POOL[0]]}))
    assert locked[0] == POOL[0] + "\n" + POOL[1] and LEAKY not in locked


async def test_demo_hint_server_answers_the_bundled_drivers_prompt():
    with DemoHintServer() as srv:
        reply = await fetch_hints(srv.v1_url, "demo", build_prompt(feedback={}, site={}, public_context={}, failure_step={}, count=3), limit=3)
    assert reply.error is None and reply.hints == [LEAKY, POOL[0], POOL[1]]
    assert [audit_hint(h, level=1)["errors"] for h in reply.hints] == [["binary_verdict_leak"], [], []]
