"""TokenScreen in a harness App: a 1,000,000-id capture (open, jump, search), the picker,
the hint span, logprob detail and the media binding with a tampered image."""

from __future__ import annotations

import gc
from pathlib import Path

import sys

import pytest
from conftest import ScreenHarness, wait_until
from textual.app import App
from textual.geometry import Offset, Region
from textual.scrollbar import ScrollBar
from textual.widget import Widget

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import LocalTokenizerDecoder, RawDecoder
from eviscene_tui.scaffold.synthetic_capture import HINT, big_case, synthetic_case
from eviscene_tui.options import AppOptions
from eviscene_tui.scaffold.samples.synthetic import make_big_capture_ids
from eviscene_tui import pace
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui.screens.tokens import TokenScreen
from eviscene_tui.ui.widgets.image_preview import HalfBlockImage
from eviscene_tui.ui.widgets.lean_scrollbar import LeanScrollBar
from eviscene_tui.ui.widgets.token_view import TokenView


def _options(tmp_path: Path, **kw) -> AppOptions:
    return AppOptions(root=tmp_path, workdir=tmp_path / "wd", **kw)


async def _settle(app, pilot):
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


def _text(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


@pytest.fixture(scope="module")
def million():
    return big_case(1_000_000)


async def test_million_ids_open_jump_search(million, tmp_path: Path):
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny-test")
    app = ScreenHarness(lambda: TokenScreen(million, _options(tmp_path), source="step:0", decoder=dec))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        assert view.data is not None and len(view.data.ids) == 1_000_000
        # a big capture is kept out of the full garbage collections while it is shown
        assert gc.get_freeze_count() > 0
        assert view.cells.runs and all(r.length == 1024 for r in view.cells.runs)
        assert "decoded by: tokenizer.json (tiny-test)" in _text(app, "#tokens-header")
        first = view.render_line(0).text
        assert "0 │" in first
        # the first image run is one row, labelled and framed
        rows = [view.render_line(y).text for y in range(10)]
        assert any("<|image_pad|> ×1024 · image #1" in r for r in rows)
        # jump to an offset through the prompt
        await pilot.press("g")
        app.screen.query_one("#tokens-prompt").value = "654,321"
        await pilot.press("enter")
        await pilot.pause()
        assert view.cursor_offset == 654_321
        assert "offset 654,321" in _text(app, "#panel-selected")
        assert "654,3" in "".join(view.render_line(y).text for y in range(view.size.height))
        # search by id: the next image pad run start after the cursor
        pad = tiny.special_id("<|image_pad|>")
        await pilot.press("slash")
        app.screen.query_one("#tokens-prompt").value = f"#{pad}"
        await pilot.press("enter")
        await pilot.pause()
        run = view.cells.run_at(view.cursor_offset)
        assert run is not None and run.start > 654_321
        assert "image-pad run" in _text(app, "#panel-selected")
        # search by text, then next match with n
        await pilot.press("slash")
        await pilot.press(*"capt")
        app.screen.query_one("#tokens-prompt").value = "caption"
        await pilot.press("enter")
        await _settle(app, pilot)  # the text search runs in a worker
        at = view.cursor_offset
        assert "caption" in dec.piece(view.data.ids[at])
        await pilot.press("n")
        await _settle(app, pilot)
        assert view.cursor_offset > at and "caption" in dec.piece(view.data.ids[view.cursor_offset])
        # text across token boundaries
        assert app.screen.search("caption date") is None
        await _settle(app, pilot)
        span = view._match_span
        assert span is not None and span[1] - span[0] == 2 and view.cursor_offset == span[0]
        assert "match at offsets" in _text(app, "#tokens-status")
        # the completion part carries the logprob overlay
        comp_start = view.data.completion_start
        view.jump_to_offset(comp_start + 3)
        await pilot.pause()
        assert "logprob" in _text(app, "#panel-selected")
        # a bad offset is explained, not a crash
        assert not app.screen.jump_to("2,000,000")
        assert "offset must be a number" in _text(app, "#tokens-status")
        assert gc_hold.holds() == 1
        # the flowing text, once painted, is kept out of the full collections too
        view.focus()
        await pilot.press("f")
        await wait_until(lambda: view.mode == "flow" and gc_hold.holds() == 2, pilot=pilot, what="the flow view painted and held")
    assert gc.get_freeze_count() == 0 and gc_hold.holds() == 0  # given back to the collector once the screen is gone


async def test_picker_hint_span_and_media(tmp_path: Path):
    case = synthetic_case(tmp_path / "run")
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny-test")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), decoder=dec))
    async with app.run_test(size=(150, 50)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert screen.has_class("-picking")
        picker = screen.query_one("#tokens-picker")
        ids = [o.id for o in picker._options if o.id]
        assert "attempt:0:teacher_prompt_ids" in ids and "step:1" in ids
        picker.highlighted = [o.id for o in picker._options].index("attempt:0:teacher_prompt_ids")
        await pilot.press("enter")
        await _settle(app, pilot)
        assert screen.loaded_key == "attempt:0:teacher_prompt_ids"
        diff = _text(app, "#panel-diff")
        assert "hint in teacher" in diff and "found from the hint text" in diff and "search the caption" in diff
        assert "apart from the hint, the prompt equals the student prompt" in diff
        await pilot.press("h")
        await pilot.pause()
        view = screen.query_one("#token-view", TokenView)
        a, b = view.data.highlight
        assert view.cursor_offset == a and (a, b) == screen.hint.range
        assert tiny.decode(view.data.ids[a:b]).strip() == HINT
        media = _text(app, "#panel-media")
        assert "sha256 verified" in media and "same images" in media and "/models/Qwen3.5-9B" in media
        assert _text(app, "#media-problems") == ""
        assert screen.query(HalfBlockImage)  # the preview was drawn
        # special tokens are labelled in the grid
        await pilot.press("home")
        await pilot.pause()
        grid = "".join(view.render_line(y).text for y in range(view.size.height))
        assert "<|im_sta" in grid and "<|image_pad|> ×64 · image #1" in grid
        # side by side: the student prompt next to the teacher, both at the hint point
        await pilot.press("s")
        await _settle(app, pilot)
        assert screen.has_class("-paired")
        pair = screen.query_one("#token-pair", TokenView)
        assert pair.data is not None and pair.data.ids == view.data.student_ids
        assert pair.cursor_offset == view.data.prompt_diff.prefix == view.cursor_offset
        assert "right: student prompt" in _text(app, "#pair-title")
        await pilot.press("s")
        assert not screen.has_class("-paired")


async def test_tampered_image_is_visible_and_completion_detail(tmp_path: Path):
    case = synthetic_case(tmp_path / "run")
    [img] = list((tmp_path / "run" / "media").iterdir())
    img.write_bytes(b"not the image any more")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:0:completion_ids", decoder=LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")))
    async with app.run_test(size=(150, 50)) as pilot:
        await _settle(app, pilot)
        assert "SHA MISMATCH" in _text(app, "#panel-media")
        problems = _text(app, "#media-problems")
        assert "media_mismatch" in problems and "tampered" in problems
        sel = _text(app, "#panel-selected")
        assert "special token <think>" in sel and "added (special: false)" in sel
        assert "top-2 alternatives" in sel and "renormalised" in sel
        await pilot.press("right")
        await pilot.pause()
        assert "p=" in _text(app, "#panel-selected")
        assert "Teacher completion vs source step completion" in _text(app, "#panel-align")


async def test_raw_fallback_and_bad_source(tmp_path: Path):
    case = synthetic_case(tmp_path / "run")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:7:completion_ids", decoder=RawDecoder()))
    async with app.run_test(size=(120, 30)) as pilot:
        await _settle(app, pilot)
        # a source that names nothing falls back to the picker, with the reason shown
        assert "no attempts recorded for round 7" in _text(app, "#tokens-status")
        assert app.screen.has_class("-picking")
        assert "raw ids" in _text(app, "#tokens-header")


async def test_flowing_raw_ids_are_set_apart_and_never_split(tmp_path: Path):
    """No tokenizer: the flowing view shows ``#8678 #198 …`` (it ran ids together as
    ``#8678#198#39459`` and cut one across two lines)."""
    import re

    case = synthetic_case(tmp_path / "run")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:0:student_prompt_ids", decoder=RawDecoder()))
    async with app.run_test(size=(90, 30)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        view.mode = "flow"
        await _settle(app, pilot)
        lines = [view.render_line(y).text.split("\u2502 ", 1)[-1].rstrip() for y in range(view.scrollable_content_region.height)]
        text_lines = [t for t in lines if t]
        assert text_lines
        shown: list[int] = []
        for t in text_lines:
            bare = re.sub(r"\[[^\]]*\]|<\|[a-z_]+\|>", " ", t)  # image-run and special-token chips
            assert not re.search(r"\d#", bare), t  # ids never run together
            assert not re.match(r"\s*\d", bare), t  # no line starts with the rest of an id
            shown += [int(n) for n in re.findall(r"#(\d+)", bare)]
        runs = view.cells.runs
        ids = [tid for k, tid in enumerate(view.data.ids)
               if view.token_label(tid) is None and not any(r.start <= k < r.start + r.length for r in runs)]
        assert shown == ids[: len(shown)] and len(shown) > 20  # every id whole, in order


async def test_the_token_view_flags_a_media_binding_drift(tmp_path: Path):
    """An image whose bytes no longer match the record (found by the case's integrity
    check and by the capture's own verification): its image-pad chip says so in the
    flowing view, and the Checks panel lists what the integrity check found beyond that."""
    from eviscene_tui.artifacts.case import load_case
    from eviscene_tui.artifacts.report import checked_case
    from eviscene_tui.artifacts.layout import discover
    from eviscene_tui.scaffold.samples import copy_case

    repo = Path(__file__).resolve().parents[2] / "sample_runs"
    root = copy_case(repo, "damaged", tmp_path / "copy")
    (ref,), _ = discover(root)
    _summary, problems = checked_case(ref, root.parent)
    integrity = [(str(p.code), p.path, p.message) for p in problems]
    ledger = str(root / "rounds" / "round-01" / "repair_attempts.jsonl")
    integrity.append(("media_mismatch", ledger, "attempt row 1: teacher prompt has 2 image-pad run(s) of id 248056 but psd_media lists 1 image(s)"))
    case = load_case(root)
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:1:teacher_prompt_ids", decoder=RawDecoder(),
                                            integrity=integrity))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        view.mode = "flow"
        await _settle(app, pilot)
        rows = [view.render_line(y).text for y in range(view.scrollable_content_region.height)]
        assert any("image #1 \u2717 bytes differ from the record" in r for r in rows), rows
        checks = _text(app, "#panel-checks")
        assert "found by the integrity check" in checks and "2 image-pad run(s)" in checks


def test_media_drift_keeps_what_the_capture_did_not_find_itself(tmp_path: Path):
    from eviscene_tui.tokens.capture import CaptureData
    from eviscene_tui.ui.screens.tokens import media_drift

    run = tmp_path / "rounds" / "round-00"
    data = CaptureData(key="attempt:0.1:teacher_prompt_ids", label="x", kind="prompt", ids=[1], run_dir=str(run))
    ledger = str(run / "repair_attempts.jsonl")
    integrity = [
        ("media_mismatch", ledger, "attempt row 2: student prompt has 0 image-pad run(s)"),
        ("media_mismatch", ledger, "attempt row 1: another attempt's pad runs"),
        ("path_outside_root", str(run / "media" / "a.image"), "symlink points outside the case root"),
        ("json_invalid", str(run / "manifest.json"), "not about media"),
    ]
    assert [p[2] for p in media_drift(data, integrity)] == ["attempt row 2: student prompt has 0 image-pad run(s)", "symlink points outside the case root"]


async def test_decoder_resolved_from_tokenizer_option(tmp_path: Path):
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text(tiny.tiny_tokenizer_json(), encoding="utf-8")
    case = synthetic_case(tmp_path / "run")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path, tokenizer=tok), source="attempt:0:student_prompt_ids"))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        header = _text(app, "#tokens-header")
        assert "tokenizer.json" in header and str(tok) in header
        assert "qwen3_5" in header


async def test_image_preview_modes(tmp_path: Path, monkeypatch):
    """Half-block fallback by default; textual-image when the launcher prepared it."""
    from PIL import Image

    from eviscene_tui.ui.widgets import image_preview as ip

    img = tmp_path / "x.png"
    Image.new("RGB", (40, 20), (10, 200, 30)).save(img)
    pil, info = ip.load_preview_image(img)
    assert (info["width"], info["height"], info["format"]) == (40, 20, "PNG")
    bad, info = ip.load_preview_image(tmp_path / "missing.png")
    assert bad is None and info["error"] == "FileNotFoundError"

    class One(App):
        def compose(self):
            yield ip.ImagePreview(id="p")

    app = One()
    async with app.run_test(size=(60, 20)) as pilot:
        prev = app.query_one(ip.ImagePreview)
        prev.set_image(pil, "image #1  40×20")
        await pilot.pause()
        half = app.query_one(ip.HalfBlockImage)
        line = half.render_line(0)
        assert "▀" in line.text
        monkeypatch.setattr(ip, "_graphics_ready", False)
        monkeypatch.setattr(ip, "_graphics_failure", "")
        assert ip.graphics_mode() == "half-block"
        if ip.prepare_terminal_graphics():
            assert ip.graphics_mode().startswith("textual-image")
            prev.set_image(pil, "again")
            await pilot.pause()
            assert not app.query(ip.HalfBlockImage)
            assert len(prev.children) == 2
        else:  # the probe failed (no terminal here): the mode says why
            assert ip.graphics_mode().startswith("half-block (terminal graphics off: ")
        monkeypatch.setattr(ip, "_graphics_ready", False)


def test_a_failed_terminal_probe_is_said_beside_the_preview(monkeypatch) -> None:
    import builtins

    from eviscene_tui.ui.widgets import image_preview as ip

    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.startswith("textual_image"):
            raise OSError("terminal did not answer \x1b[31m")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(ip, "_graphics_ready", False)
    monkeypatch.setattr(ip, "_graphics_failure", "")
    monkeypatch.delitem(sys.modules, "textual_image.widget", raising=False)
    monkeypatch.setattr(builtins, "__import__", refuse)
    assert ip.prepare_terminal_graphics() is False
    mode = ip.graphics_mode()
    assert mode.startswith("half-block (terminal graphics off: OSError: terminal did not answer")
    assert "\x1b" not in mode  # the reason passed safe_text


async def test_server_decoding_in_screen(tmp_path: Path):
    """No tokenizer: the screen decodes through the fake server's /detokenize (real loopback)."""
    from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer

    case = synthetic_case(tmp_path / "run")
    with FakeVLLMServer(personality="nightly") as srv:
        app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path, policy_url=srv.v1_url), source="attempt:0:teacher_prompt_ids"))
        async with app.run_test(size=(150, 50)) as pilot:
            await _settle(app, pilot)
            await _settle(app, pilot)
            header = _text(app, "#tokens-header")
            assert "server /detokenize" in header and srv.base_url in header
            assert "/tokenizer_info added tokens" in header
            view = app.screen.query_one("#token-view", TokenView)
            grid = "".join(view.render_line(y).text for y in range(view.size.height))
            first_row = view.render_line(0).text.split("│", 1)[1].split()
            assert first_row[:8] == ["<|im_sta…", "s", "y", "s", "t", "e", "m", "↵"]
            assert "·verify" in grid and "<|image_pad|> ×64 · image #1" in grid
            diff = _text(app, "#panel-diff")
            assert "search the caption" in diff and "found from the hint text" in diff
            paths = {r["path"] for r in srv.recorder.requests}
            assert "/detokenize" in paths


async def test_live_capture_and_empty_capture(tmp_path: Path):
    """Another screen can hand over a live capture (from_stream); an empty one does not crash."""
    from eviscene_tui.tokens.capture import from_stream

    prompt = tiny.encode("user\nIs it real?\x1b]0;PWNED\x07\x1b[2J")
    comp = tiny.encode("It is fake.")
    lps = [{"token": "x", "logprob": -0.2, "token_id": t, "top": [{"token": "x", "logprob": -0.2, "token_id": t}, {"token": "y", "logprob": -2.0, "token_id": 300}]} for t in comp]
    live = from_stream(prompt, comp, logprobs=lps, usage={"completion_tokens": len(comp) + 1, "prompt_tokens": len(prompt)}, status="complete")
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")
    app = ScreenHarness(lambda: TokenScreen(None, _options(tmp_path), capture=live, decoder=dec))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(app, pilot)
        checks = _text(app, "#panel-checks")
        assert f"{len(comp)} completion ids but usage.completion_tokens = {len(comp) + 1}" in checks
        view = app.screen.query_one("#token-view", TokenView)
        view.jump_to_offset(len(prompt))
        await pilot.pause()
        sel = _text(app, "#panel-selected")
        assert "exp(logprob)" in sel and "logprob -0.2000" in sel
        assert "logprob colours" in checks
        # escape sequences from token bytes never reach the terminal
        for y in range(view.size.height):
            for seg in view.render_line(y):
                assert "\x1b" not in seg.text and "\x07" not in seg.text
        assert "␛" in "".join(view.render_line(y).text for y in range(3))

    empty = from_stream([], [])
    app = ScreenHarness(lambda: TokenScreen(None, _options(tmp_path), capture=empty, decoder=RawDecoder()))
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(app, pilot)
        await pilot.press("right", "down", "end", "n", "i", "h", "s")
        app.screen.search("abc")
        await pilot.pause()
        assert "no match for 'abc'" in _text(app, "#tokens-status")
        assert not app.screen.jump_to("5")
        await pilot.pause()
        assert "offset must be a number" in _text(app, "#tokens-status")


# --------------------------------------------------------------------------- hint span, logprobs, pair, flow
S = tiny.special_id


def _chat(system: str, user: str, hint: str | None = None) -> list[int]:
    ids = [S("<|im_start|>")] + tiny.encode("system\n" + system) + [S("<|im_end|>")] + tiny.encode("\n")
    ids += [S("<|im_start|>")] + tiny.encode("user\n" + user) + [S("<|im_end|>")] + tiny.encode("\n")
    if hint is not None:
        ids += [S("<|im_start|>")] + tiny.encode("user\nHint: " + hint) + [S("<|im_end|>")] + tiny.encode("\n")
    return ids + [S("<|im_start|>")] + tiny.encode("assistant\n")


TOOLS_LIST = "You check photos.\n# Tools\n- reverse_image_search(image_id): Find earlier copies.\n- web_search(query): Search."
TOOLS_JSON = 'You check photos.\n# Tools\n{"function":{"name":"reverse_image_search"}}\n{"function":{"name":"web_search"}}'
LIVE_HINT = "Open the oldest reverse-image match first.\nQuote its date."


def _rebuilt_case():
    """A case whose round 0 archived the hinted prompt with the tools as a list, while the live
    server renders them as JSON (as the fake vLLM server does in the demo)."""
    from eviscene_tui.artifacts.models import AttemptRecord
    from eviscene_tui.scaffold.synthetic_capture import SyntheticCase, SyntheticRound, _trace

    student = _chat(TOOLS_LIST, "Claim: a flooded street.")
    archived = _chat(TOOLS_LIST, "Claim: a flooded street.", LIVE_HINT)
    live = _chat(TOOLS_JSON, "Claim: a flooded street.", LIVE_HINT)
    steps = [{"stage": "unified_react", "metadata": {"policy_token_capture": {
        "status": "complete", "prompt_token_ids": student, "completion_token_ids": tiny.encode("search"), "missing": []}}}]
    att = AttemptRecord.model_validate({
        "schema_version": "ifv-psd-repair-attempt-v1", "repair_site": {"source_step_index": 0, "step_index": 0},
        "hint_record": {"text": LIVE_HINT}, "student_prompt_ids": student, "teacher_prompt_ids": archived,
    })
    return SyntheticCase(_trace(steps), [SyntheticRound(0, Path("/nonexistent"), [att])]), student, archived, live


def _live(student, live, *, logprobs: bool):
    from eviscene_tui.policy.capture import LiveSnapshot, live_capture
    from eviscene_tui.policy.events import TokenLogprob
    from eviscene_tui.policy.config import PolicyConfig
    from eviscene_tui.policy.request import TeacherRequest

    comp = tiny.encode("I will open it.")
    lps = tuple(TokenLogprob(token="x", logprob=-0.1, token_id=t) for t in comp) if logprobs else ()
    snap = LiveSnapshot(prompt_token_ids=tuple(live), completion_token_ids=tuple(comp), logprobs=lps, usage=None, status="complete")
    req = TeacherRequest(messages=[{"role": "user", "content": "x"}], hint=LIVE_HINT, round_index=0, step_index=0)
    return live_capture(snap, student_prompt_ids=student, request=req, config=PolicyConfig(logprobs=logprobs))


async def test_live_rebuilt_prompt_hint_span_from_its_text_and_first_difference(tmp_path: Path):
    """The live prompt renders the tools differently: the span is the hint's own text (not
    the student/teacher difference, which starts in the tool schema), the panel says the
    prompt differs from the archived hinted prompt beyond the hint and where, and `h`
    jumps to the same span the panel shows."""
    case, student, archived, live = _rebuilt_case()
    data = _live(student, live, logprobs=False)
    diff_start = data.prompt_diff.prefix
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), capture=data, decoder=dec))
    async with app.run_test(size=(160, 50)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        a, b = screen.hint.range
        assert tiny.decode(live[a:b]).strip() == LIVE_HINT and diff_start < a - 20
        diff = _text(app, "#panel-diff")
        assert f"hint in teacher ids {a:,}–{b - 1:,}" in diff and "found from the hint text" in diff
        assert f"differs from the archived hinted prompt of round 0 ({len(archived):,} ids) beyond the hint" in diff
        assert f"first difference at id {diff_start:,} (before the hint" in diff
        assert '{"function"' in diff and "-·reverse_image" in diff
        await pilot.press("h")
        await pilot.pause()
        view = screen.query_one("#token-view", TokenView)
        assert view.cursor_offset == a and view.data.highlight == (a, b)
        assert f"hint span: ids {a:,}–{b - 1:,}" in _text(app, "#tokens-status")
        # logprobs were not requested: said on the token and when l is pressed
        view.jump_to_offset(len(live) + 1)
        await pilot.pause()
        assert "the request did not ask for logprobs" in _text(app, "#panel-selected")
        await pilot.press("l")
        await pilot.pause()
        assert "the request did not ask for logprobs" in _text(app, "#tokens-status")


async def test_rollout_capture_panel_and_h_give_one_answer(tmp_path: Path):
    """The teacher rollout capture holds the hinted prompt: the side panel and `h` report the
    same located span (`h` used to say there was none)."""
    case = synthetic_case(tmp_path / "run")
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:0:repair_rollout_token_capture", decoder=dec))
    async with app.run_test(size=(150, 50)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        a, b = screen.hint.range
        assert f"hint in teacher ids {a:,}–{b - 1:,}" in _text(app, "#panel-diff")
        await pilot.press("h")
        await pilot.pause()
        assert screen.query_one("#token-view", TokenView).cursor_offset == a
        assert f"hint span: ids {a:,}–{b - 1:,}" in _text(app, "#tokens-status")
        assert tiny.decode(screen.data.ids[a:b]).strip() == HINT


async def test_captures_list_opens_with_a_row_highlighted_and_pair_is_aligned(tmp_path: Path):
    case = synthetic_case(tmp_path / "run")
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), decoder=dec))
    async with app.run_test(size=(150, 30)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        picker = screen.query_one("#tokens-picker")
        assert picker.highlighted is not None and picker.highlighted_option.id == "step:1"
        await pilot.press("down", "down", "enter")  # student prompt, then teacher prompt
        await _settle(app, pilot)
        assert screen.loaded_key == "attempt:0:teacher_prompt_ids"
        await pilot.press("c")
        await _settle(app, pilot)
        assert picker.highlighted_option.id == "attempt:0:teacher_prompt_ids"  # the capture on screen
        await pilot.press("escape")
        await pilot.press("minus", "minus", "minus")  # narrow cells: the prefix end is several rows down
        await pilot.press("s")
        await _settle(app, pilot)
        main = screen.query_one("#token-view", TokenView)
        pair = screen.query_one("#token-pair", TokenView)
        prefix = main.data.prompt_diff.prefix
        assert main.cursor_offset == pair.cursor_offset == prefix
        rows = [v.row_of_cell(v.cursor) - v.scroll_offset.y for v in (main, pair)]
        assert rows[0] == rows[1] == screen.PAIR_ROW
        assert main.row_of_cell(main.cursor) > screen.PAIR_ROW  # the left pane did scroll


async def test_flowing_view_wraps_text_labels_specials_and_collapses_images(tmp_path: Path):
    case = synthetic_case(tmp_path / "run")
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t")
    app = ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="attempt:0:teacher_prompt_ids", decoder=dec))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        view.jump_to_offset(40)
        await pilot.press("f")
        await pilot.pause()
        assert view.mode == "flow" and "flowing text" in _text(app, "#tokens-status")
        lines = [view.render_line(y).text for y in range(view.size.height)]
        text = "\n".join(lines)
        assert "<|im_start|>system↵" in text and "You verify whether a photo is real.<|im_end|>" in text
        assert "[<|image_pad|> ×64 · image #1]" in text  # the image run is one chip
        assert "Hint: search the caption text before judging the photo.<|im_end|>" in text
        assert view.cursor_offset == view.cells.run_at(40).start  # the cursor stayed on its token
        # token boundaries: neighbouring tokens have different backgrounds
        strip = view.render_line(1)
        segs = [seg for seg in strip if seg.text.strip() and "│" not in seg.text]
        bgs = {seg.style.bgcolor for seg in segs}
        assert len(bgs) >= 2
        # the cursor moves by lines, and back to the grid on the same token
        before = view.cursor
        await pilot.press("down")
        assert view.cursor > before
        at = view.cursor_offset
        await pilot.press("f")
        await pilot.pause()
        assert view.mode == "grid" and view.cursor_offset == at


async def test_million_ids_flowing_view_and_search_progress(million, tmp_path: Path):
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny-test")
    app = ScreenHarness(lambda: TokenScreen(million, _options(tmp_path), source="step:0", decoder=dec))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        view = screen.query_one("#token-view", TokenView)
        await pilot.press("f")
        await pilot.press("end")
        await pilot.pause()
        assert view.cursor_offset == 999_999
        tail = "\n".join(view.render_line(y).text for y in range(view.size.height))
        assert "C   999," in tail
        assert sum(view.flow.exact) < len(view.flow.exact) / 10  # only what was shown got wrapped
        await pilot.press("pageup", "pageup")
        assert view.cursor_offset < 999_999
        # a text search that finds nothing scans all 1,000,000 ids in a worker, with progress
        seen: list[str] = []
        real = screen._status
        screen._status = lambda text: (seen.append(text), real(text))
        screen.search("no such words anywhere")
        await _settle(app, pilot)
        assert any("of 1,000,000 ids" in t for t in seen)
        assert "no match for 'no such words anywhere'" in _text(app, "#tokens-status")


async def test_step_detail_k_opens_the_token_inspector_on_that_step(tmp_path_factory):
    """The step detail says "press k to open it in the token inspector": k does (whole app)."""
    from ui_helpers import make_app, open_case, sample_root, wait_for

    from eviscene_tui.ui.screens.step_detail import StepDetailScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(140, 40)) as pilot:
        case_screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        failure = case_screen.view.failure_index
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, StepDetailScreen))
        assert "press k to open it in the token inspector" in str(app.screen.query_one("#detail-doc").content)
        await pilot.press("k")
        assert await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen) and app.screen.loaded_key is not None)
        assert app.screen.loaded_key == f"step:{failure}" and app.screen.data.ids
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is case_screen)


async def test_remote_pieces_are_asked_for_the_view_and_a_margin_only(tmp_path: Path):
    """With a remote decoder the view asks for the pieces on screen and a page above and
    below, not for the whole capture."""
    from eviscene_tui.tokens.capture import CaptureData
    from eviscene_tui.tokens.decode import DecodeSource, TokenDecoder

    class Remote(TokenDecoder):
        source = DecodeSource.SERVER

        def _piece(self, token_id: int) -> str | None:
            return None  # never fetched: every id stays pending

        def pending(self, ids):
            return list(dict.fromkeys(i for i in ids if i not in self._cache))

    data = CaptureData(key="k", label="many distinct ids", kind="prompt", ids=list(range(1_000, 201_000)))
    asked: list[int] = []

    from textual.screen import Screen

    class Viewer(Screen):
        def compose(self):
            yield TokenView(id="token-view")

        def on_mount(self) -> None:
            self.query_one(TokenView).load(data, Remote(label="remote"))

        def on_token_view_pieces_needed(self, event: TokenView.PiecesNeeded) -> None:
            asked.extend(event.ids)

    app = ScreenHarness(Viewer)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one(TokenView)
        height = view.scrollable_content_region.height
        per_row = view.per_row
        assert 1_000 in asked  # the first token on screen
        assert 1_000 + (2 * height - 1) * per_row in asked  # a page below the view
        assert 1_000 + 5 * height * per_row not in asked and len(asked) <= 3 * height * per_row + per_row


def _chat_capture_app(tmp_path: Path, n: int) -> ScreenHarness:
    """The token inspector on an ``n``-id capture of chat turns with tool calls and images:
    many short lines, which the flowing layout's line estimate does not see."""
    case = big_case(n, ids=make_big_capture_ids(n))
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny-test")
    return ScreenHarness(lambda: TokenScreen(case, _options(tmp_path), source="step:0", decoder=dec))


async def test_flowing_view_keeps_the_cursor_on_screen_while_paging_through_unwrapped_text(tmp_path: Path):
    """Text not yet shown is laid out by an estimate; paging into it wraps it exactly, and the
    cursor's line must stay on screen (it used to land below the view when the wrapped lines
    were more than the estimate)."""
    app = _chat_capture_app(tmp_path, 200_000)
    async with app.run_test(size=(160, 50)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        await pilot.press("f")
        await pilot.pause()
        view.jump_to_offset(100_000)
        await pilot.pause()
        flow = view.flow
        assert flow is not None
        for key in ["pagedown"] * 8 + ["pageup"] * 4:
            before = view.cursor
            await pilot.press(key)
            await pilot.pause()
            line = flow.line_of_cell(view.cursor)
            top, height = view.scroll_offset.y, view.scrollable_content_region.height
            assert view.cursor != before
            assert top <= line < top + height, (key, line, top, height)
            shown = [view.render_line(y).text for y in range(height)]
            assert any(frag.text.strip() and frag.text.strip() in text for text in shown for frag in flow.line(line)), "the cursor's line is painted"


def _cells(strips) -> list[list[tuple[str, object]]]:
    return [[(seg.text, seg.style) for seg in strip] for strip in strips]


async def test_the_views_lines_equal_textuals_line_pipeline_in_both_modes(tmp_path: Path):
    """The token view hands its cached lines to the screen itself (Textual would copy and
    filter every line in every frame): what it hands over equals Textual's own pipeline."""
    app = _chat_capture_app(tmp_path, 60_000)
    async with app.run_test(size=(160, 50)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        assert view.app.get_line_filters(), "the comparison must include the app's line filters"
        for mode in ("grid", "flow"):
            if view.mode != mode:
                await pilot.press("f")
            view.jump_to_offset(30_000, screen_row=5)
            await pilot.pause()
            height, width = view.size.height, view.size.width
            for crop in (Region(0, 0, width, height), Region(0, 3, width, 7), Region(4, 0, width - 10, height)):
                ours = view.render_lines(crop)
                textual = Widget.render_lines(view, crop)
                assert len(ours) == len(textual) == crop.height
                assert _cells(ours) == _cells(textual), (mode, crop)


async def test_the_next_page_is_rendered_ahead_while_the_operator_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    app = _chat_capture_app(tmp_path, 60_000)
    async with app.run_test(size=(160, 50)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        height = view.scrollable_content_region.height
        for mode in ("grid", "flow"):
            if view.mode != mode:
                await pilot.press("f")
            await pilot.press("pagedown")  # the cursor to the bottom row
            await wait_until(lambda: view.ahead_pending == 0, pilot=pilot, what="the page below rendered ahead")
            built = view.probes.lines_built
            await pilot.press("pagedown")
            await wait_until(lambda: view.ahead_pending == 0, pilot=pilot)
            assert view.probes.lines_built - built >= height - 2  # the page after this one, ahead again
            built = view.probes.lines_built
            with monkeypatch.context() as typing:  # an operator who keeps pressing keys
                typing.setattr(pace, "last_input", lambda: float("inf"))
                await pilot.press("pagedown")
                await wait_until(lambda: view.ahead_pending == 0, pilot=pilot)
                # the page came from the lines rendered ahead (only the cursor's line is new), and
                # nothing more was rendered ahead while keys kept coming
                assert view.probes.lines_built - built <= 2, mode
                await pilot.press("pagedown")
                await wait_until(lambda: view.ahead_pending == 0, pilot=pilot)
                assert view.probes.lines_built - built >= height - 2  # not ahead this time: rendered when shown


async def test_the_views_lean_scrollbar_draws_what_textuals_scrollbar_draws(tmp_path: Path):
    """The token view's vertical scrollbar renders its rows without Textual's general widget
    pipeline; what it draws equals Textual's own bar at every position, hovered and grabbed."""
    app = _chat_capture_app(tmp_path, 60_000)
    async with app.run_test(size=(160, 50)) as pilot:
        await _settle(app, pilot)
        view = app.screen.query_one("#token-view", TokenView)
        bar = view.vertical_scrollbar
        assert isinstance(bar, LeanScrollBar) and bar.display
        seen: set[tuple] = set()
        for key in ["pagedown"] * 6 + ["end", "home"]:
            await pilot.press(key)
            await pilot.pause()
            width, height = bar.size
            for state in ("plain", "hover", "grabbed"):
                bar.mouse_over = state == "hover"
                bar.grabbed = Offset(0, 0) if state == "grabbed" else None
                for crop in (Region(0, 0, width, height), Region(0, 4, width, 9), Region(1, 0, width - 1, height)):
                    ours = bar.render_lines(crop)
                    assert _cells(ours) == _cells(ScrollBar.render_lines(bar, crop)), (key, state, crop)
                    seen.add(tuple(tuple(row) for row in _cells(ours)))
            bar.mouse_over, bar.grabbed = False, None
        assert len(seen) > 6  # the thumb moved and the colours changed: different drawings were compared


async def test_k_reads_the_capture_before_the_token_screen_is_pushed(tmp_path_factory, monkeypatch):
    """k on a step: the capture is read and laid out while the case screen is still shown
    (beside an idle screen the worker runs at full speed), then the token screen opens with it
    and loads nothing itself; a second k during the read opens one screen, not two."""
    from ui_helpers import make_app, open_case, sample_root, wait_for

    loads: list[str] = []
    monkeypatch.setattr(TokenScreen, "_load_capture", lambda self, key: loads.append(key))
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(140, 40)) as pilot:
        case_screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        failure = case_screen.view.failure_index
        await pilot.press("k", "k")
        assert await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen) and app.screen.loaded_key is not None)
        screen = app.screen
        assert screen.loaded_key == f"step:{failure}" and screen.data.ids and screen.query_one("#token-view", TokenView).rows is not None
        assert loads == []  # shown from what the case screen prepared
        await pilot.pause()
        assert [type(s).__name__ for s in app.screen_stack].count("TokenScreen") == 1
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is case_screen)
        assert "opening the token capture" not in str(case_screen.query_one("#trace-status").content)


async def test_a_capture_that_cannot_be_prepared_still_offers_the_captures(tmp_path_factory):
    """What the case screen could not prepare (here a step the trace does not have) is
    answered on the token screen as a failed load is: the list of captures, and why."""
    from ui_helpers import make_app, open_case, sample_root, wait_for

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(140, 40)) as pilot:
        case_screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        case_screen._open_tokens("step:99999")
        assert await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen) and app.screen.has_class("-picking"))
        assert "there is no step 99999" in _text(app, "#tokens-status") and "pick a capture" in _text(app, "#tokens-status")
