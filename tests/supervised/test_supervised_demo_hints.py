from eviscene_tui.artifacts.case import load_case
from eviscene_tui.supervised import SearchSettings, SupervisedSearch, inputs_from_case
from eviscene_tui.supervised.demo_hints import LEAKY, POOL, DemoHintServer, propose
from eviscene_tui.supervised.hints import build_prompt

from supervised_fixtures import write_driver_case


def _body(fb, count=3):
    return {"messages": build_prompt(feedback=fb, site={}, public_context={}, failure_step={}, count=count)}


def test_propose_follows_the_feedback_rules():
    assert propose(_body({})) == [LEAKY, POOL[0], POOL[1]]
    assert propose(_body({"excluded_hints": [POOL[0]]}, count=2)) == [LEAKY, POOL[1]]
    locked = propose(_body({"locked_hint": POOL[0], "excluded_hints": [POOL[0]]}))
    assert locked[0] == POOL[0] + "\n" + POOL[1] and LEAKY not in locked


async def test_demo_hint_server_with_the_search(tmp_path):
    with DemoHintServer() as srv:
        inputs = inputs_from_case(load_case(write_driver_case(tmp_path / "out")), label="c")
        s = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op", hint_url=srv.v1_url, hint_model="demo"))
        s.begin_round()
        s.accept_site()
        props = await s.fetch_proposals()
        assert [p.audit["errors"] for p in props] == [["binary_verdict_leak"], [], []]
        s.close()
