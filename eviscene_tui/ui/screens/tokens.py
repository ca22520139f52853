"""Token capture and media binding inspector.

``TokenScreen(case, options, *, source=None)``: ``source`` names a capture
(``step:7``, ``attempt:0:teacher_prompt_ids``, ``attempt:0.1:completion_ids``,
``recorded:<path>``); ``None`` opens a picker of every capture in the case.

Panels: the token grid (:class:`TokenView`), the decode source, the selected token
(id, piece, logprob, top-k), capture checks (status, ``missing`` codes, accounting),
student-vs-teacher diff (where the hint went), teacher-vs-source completion alignment,
and the media binding (images verified against ``media/``, pad runs vs images,
teacher/student conditioning, processor id, merge size, preview).

All I/O (case files, tokenizer, policy server, image bytes) happens in workers that
post the typed messages below; handlers only update widgets.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import httpx
from textual import on, work
from textual.worker import get_current_worker
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from textual.css.styles import RulesMap

from eviscene_tui.artifacts.case import CaseBundle
from eviscene_tui.options import AppOptions
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui.actions import bindings
from eviscene_tui.safe_text import safe_text
from eviscene_tui.tokens.capture import CaptureData, logprob_bucket, prob_of
from eviscene_tui.tokens.decode import DecodeSource, RawDecoder, TokenDecoder, cached_decoder, resolve_decoder
from eviscene_tui.tokens.diff import alignment_summary
from eviscene_tui.tokens.hintspan import HintSpan
from eviscene_tui.tokens.layout import CellLayout
from eviscene_tui.tokens.search import find_text, matching_ids
from eviscene_tui.tokens.sources import CaptureCase, CaptureError, CaptureRef, enumerate_captures, load_capture, locate_hint
from eviscene_tui.tokens.vision import VisionIds, guess_from_ids
from eviscene_tui.ui.messages import (
    CaptureFailed,
    CaptureLoaded,
    CapturesListed,
    DecoderReady,
    HintLocated,
    ImageReady,
    LayoutReady,
    PiecesFetched,
    SpanDecoded,
    TokenSearchDone,
    TokenSearchProgress,
)
from eviscene_tui.ui.widgets.image_preview import ImagePreview, graphics_mode, load_preview_image
from eviscene_tui.ui.widgets.token_view import TokenView, display_piece, run_label
from eviscene_tui.ui.widgets.key_footer import KeyFooter

LEVEL_MARK = {"ok": ("✓", "$success"), "warn": ("!", "$warning"), "fail": ("✗", "$error"), "info": ("·", "$foreground-muted")}


# --------------------------------------------------------------------------- helpers
#: a capture at least this long is moved out of the garbage collector's reach while shown
GC_FREEZE_IDS = 100_000


def _c(*parts: Any) -> Content:
    return Content.assemble(*parts)


def _lines(*rows: Content) -> Content:
    out = Content("")
    for i, row in enumerate(rows):
        out = out + (Content("\n") if i else Content("")) + row
    return out


def _logprob_row(lp: float | None, ci: int) -> Content:
    """The selected token's logprob (and probability), coloured by bucket."""
    if lp is None:
        return Content.styled("no logprob recorded at this position", "$foreground-muted")
    bucket = logprob_bucket(lp) or ""
    colour = {"high": "$success", "mid": "", "low": "$warning", "vlow": "$error"}.get(bucket, "")
    p = prob_of(lp)
    ptxt = f"{p:.4f}" if p is not None else "invalid (logprob > 0)"
    return _c(("logprob ", "$foreground-muted"), (f"{lp:.4f}", colour), ("  p=", "$foreground-muted"), (ptxt, colour), (f"  (completion #{ci})", "$foreground-muted"))


def _update_in_place(panel: Static, content: Content) -> None:
    """Update a side panel, with a layout pass of the screen only when its height changes:
    the selected-token panel follows every cursor move, and a relayout of the whole screen
    at each page of the token view would cost more than painting the page."""
    width = panel.content_size.width
    same = panel.is_mounted and width > 0 and content.get_height(cast("RulesMap", panel.styles), width) == panel.content_size.height
    panel.update(content, layout=not same)


def _parse_offset(text: str) -> int | None:
    t = re.sub(r"[,_\s]", "", text)
    if t.startswith("@"):
        t = t[1:]
    return int(t) if t.isdigit() else None


def _short(sha: str | None, n: int = 12) -> str:
    return safe_text(sha or "?", single_line=True)[:n]


class TokenScreen(Screen[None]):
    """Inspect one token capture of a case (or pick one)."""

    DEFAULT_CSS = """
    TokenScreen { layout: vertical; }
    TokenScreen #tokens-header { height: auto; padding: 0 1; background: $panel; }
    TokenScreen #tokens-body { height: 1fr; }
    TokenScreen #tokens-main { width: 2fr; }
    TokenScreen #tokens-views { height: 1fr; }
    TokenScreen TokenView { height: 1fr; width: 1fr; }
    TokenScreen #token-pair { display: none; border-left: solid $panel-lighten-2; }
    TokenScreen.-paired #token-pair { display: block; }
    TokenScreen #pair-title { display: none; height: 1; padding: 0 1; background: $panel; }
    TokenScreen.-paired #pair-title { display: block; }
    TokenScreen #tokens-side { width: 1fr; min-width: 36; border-left: solid $panel-lighten-2; padding: 0 1; }
    TokenScreen #tokens-side > Static { height: auto; margin-bottom: 1; }
    TokenScreen .panel-title { text-style: bold; color: $accent; }
    TokenScreen #tokens-prompt { display: none; }
    TokenScreen #tokens-prompt.-open { display: block; }
    TokenScreen #tokens-status { height: 1; padding: 0 1; color: $foreground-muted; }
    TokenScreen #tokens-picker { height: 1fr; display: none; }
    TokenScreen.-picking #tokens-picker { display: block; }
    TokenScreen.-picking #tokens-body { display: none; }
    TokenScreen #media-problems { color: $error; text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings("tokens")

    def palette_commands(self) -> list[tuple[str, str, Any]]:
        """Commands for the app's palette (the app collects them from the active screen)."""
        view = lambda: self.query_one("#token-view", TokenView)  # noqa: E731 - a one-line accessor
        return [
            ("tokens: pick a capture", "List every token capture of this case", self.action_pick),
            ("tokens: search", "Search by id (#248056) or by decoded text", lambda: self.action_open_prompt("search")),
            ("tokens: go to offset", "Jump to an id offset", lambda: self.action_open_prompt("jump")),
            ("tokens: jump to the hint span", "Where the hint was inserted in the teacher prompt", self.action_jump_highlight),
            ("tokens: next image", "Next image-pad run", self.action_next_image),
            ("tokens: side by side", "Student vs teacher prompt (or teacher vs source completion)", self.action_toggle_pair),
            ("tokens: toggle logprob colours", "Colour completion tokens by logprob", lambda: view().action_toggle_overlay()),
            ("tokens: flowing text / grid", "Show the tokens as wrapped decoded text, or one cell per token", lambda: view().action_toggle_mode()),
        ]

    def __init__(
        self,
        case: CaptureCase | None,  # a CaseBundle, a synthetic case, or None for a live capture
        options: AppOptions,
        *,
        source: str | None = None,
        decoder: TokenDecoder | None = None,
        capture: CaptureData | None = None,
        prepared: CaptureLoaded | CaptureFailed | None = None,
        integrity: Sequence[tuple[str, str, str]] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.case = case
        self.options = options
        # the case's integrity problems (code, absolute path, message), when its check ran:
        # a media-binding drift it found is flagged on the capture of that run
        self.integrity = list(integrity or ())
        self.source = source
        self._injected_decoder = decoder
        self.decoder: TokenDecoder | None = decoder
        self.data: CaptureData | None = None
        self._gc_holds = 0  # holds this screen took on the garbage collector (see _freeze_big_capture)
        self._flow_frozen = False
        self.vision: VisionIds | None = None
        self.refs: list[CaptureRef] = []
        self._prompt_mode = "search"
        self._pending_pieces: set[int] = set()
        self._fetching = False
        self._images: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._preview_index: int | None = None
        self._spans: dict[str, str] = {}
        self.hint: HintSpan | None = None  # the located hint span of a hinted prompt (one answer for panel and `h`)
        self._hint_pending = False
        self._selected_pending = False
        self._prebuilt: LayoutReady | None = None
        self.loaded_key: str | None = None
        self._given_capture = capture
        self._prepared = prepared  # ``source`` already read and laid out by the screen that opened this one
        self._initial_source = source

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Static("", id="tokens-header", markup=False)
        yield OptionList(id="tokens-picker")
        with Horizontal(id="tokens-body"):
            with Vertical(id="tokens-main"):
                yield Static("", id="pair-title", markup=False)
                with Horizontal(id="tokens-views"):
                    yield TokenView(id="token-view")
                    yield TokenView(id="token-pair")
                yield Input(placeholder="", id="tokens-prompt")
                yield Static("", id="tokens-status", markup=False)
            with VerticalScroll(id="tokens-side"):
                yield Static("", id="panel-selected", markup=False)
                yield Static("", id="panel-checks", markup=False)
                yield Static("", id="panel-diff", markup=False)
                yield Static("", id="panel-align", markup=False)
                yield Static("", id="panel-media", markup=False)
                yield Static("", id="media-problems", markup=False)
                yield ImagePreview(id="image-preview")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._set_header()
        if self.decoder is None:
            self._resolve_decoder()
        if self._given_capture is not None:
            # a live / in-memory capture handed over by another screen (e.g. the stream view)
            self.post_message(CaptureLoaded(self._given_capture))
        elif self.source is None:
            self.action_pick()
        elif self._prepared is not None:
            # read and laid out before this screen was pushed: shown as a load's answer is
            self.query_one("#token-view", TokenView).focus()
            self.remove_class("-picking")
            self.post_message(_answer_again(self._prepared))
            self._prepared = None
        else:
            self.query_one("#token-view", TokenView).focus()
            self._open(self.source)

    async def on_unmount(self) -> None:
        while self._gc_holds:
            gc_hold.release()  # a later full collection may walk the (now dropped) capture's survivors again
            self._gc_holds -= 1
        if self.decoder is not None and self.decoder is not self._injected_decoder:
            try:
                await self.decoder.aclose()
            except (httpx.HTTPError, OSError, RuntimeError):  # closing at unmount: nothing is left to show it on
                pass

    # ------------------------------------------------------------------ workers
    @work(exclusive=True, group="tokens-decoder", exit_on_error=False, description="token inspector: _resolve_decoder")
    async def _resolve_decoder(self) -> None:
        profile, bases = _profile_and_bases(self.case, self.options)
        try:
            dec = await resolve_decoder(
                tokenizer=self.options.tokenizer,
                profile=profile,
                policy_url=self.options.policy_url,
                policy_model=self.options.policy_model,
                bases=bases,
                fallback_dirs=_fallback_tokenizer_dirs(self.options),
            )
        except Exception as exc:  # noqa: BLE001 - never leave the screen without a decoder; the failure is noted on it
            dec = RawDecoder()
            dec.notes.append(f"decoder resolution failed: {type(exc).__name__}")
        self.post_message(DecoderReady(dec))

    @work(thread=True, exclusive=True, group="tokens-list", exit_on_error=False, description="token inspector: _list_captures")
    def _list_captures(self) -> None:
        try:
            refs = enumerate_captures(self.case, workdir=self.options.record_workdirs(self.case.root if self.case is not None else None))
            self.post_message(CapturesListed(refs))
        except Exception as exc:  # noqa: BLE001 - shown as the list's error
            self.post_message(CapturesListed([], f"cannot list captures: {type(exc).__name__}: {exc}"))

    @work(thread=True, exclusive=True, group="tokens-load", exit_on_error=False, description="token inspector: _load_capture")
    def _load_capture(self, key: str) -> None:
        self.post_message(prepare_capture(self.case, key, self.options, self.decoder))

    @work(thread=True, exclusive=True, group="tokens-layout", exit_on_error=False, description="token inspector: _build_layout")
    def _build_layout(self, data: CaptureData, decoder: TokenDecoder) -> None:
        vision = _vision_for(data, decoder)
        cells = CellLayout(data.ids, vision)
        self.post_message(LayoutReady(data, cells, vision))

    @work(thread=True, exclusive=True, group="tokens-pair-layout", exit_on_error=False, description="token inspector: _build_pair_layout")
    def _build_pair_layout(self, data: CaptureData, vision: VisionIds | None) -> None:
        self.post_message(LayoutReady(data, CellLayout(data.ids, vision), vision, target="pair"))

    @work(exclusive=False, group="tokens-pieces", exit_on_error=False, description="token inspector: _fetch_loop")
    async def _fetch_loop(self) -> None:
        dec = self.decoder
        total = 0
        try:
            while self._pending_pieces and dec is not None:
                batch = list(self._pending_pieces)[:256]
                self._pending_pieces.difference_update(batch)
                total += await dec.fetch(batch)
                self.post_message(PiecesFetched(total))
        finally:
            self._fetching = False

    @work(exclusive=False, group="tokens-spans", exit_on_error=False, description="token inspector: _decode_span")
    async def _decode_span(self, key: str, which: str, ids: list[int]) -> None:
        dec = self.decoder
        if dec is None:
            return
        text = await dec.decode_span_async(ids)
        self.post_message(SpanDecoded(key, which, text))

    @work(exclusive=True, group="tokens-search", exit_on_error=False, description="token inspector: _search_text")
    async def _search_text(self, query: str, text: str, ids: list[int], start: int, forward: bool, members_needed: bool) -> None:
        """Find ``text`` over the whole capture without blocking the UI: a remote decoder's
        missing pieces are fetched first (in batches, with progress), then the pieces are
        scanned in a thread, chunk by chunk, with progress; a newer search cancels this one."""
        dec = self.decoder
        if dec is None:
            return
        worker = get_current_worker()
        if dec.source == DecodeSource.SERVER:
            todo = dec.pending(set(ids))
            for i in range(0, len(todo), 2048):
                if worker.is_cancelled:
                    return
                self.post_message(TokenSearchProgress(query, i, len(todo), "fetching pieces from the server"))
                await dec.fetch(todo[i:i + 2048])
            if todo:
                self.post_message(PiecesFetched(len(todo)))

        def progress(done: int, total: int) -> bool:
            if worker.is_cancelled:
                return False
            self.post_message(TokenSearchProgress(query, done, total))
            return True

        def scan() -> tuple[tuple[int, int] | None, set[int] | None]:
            members = matching_ids(set(ids), dec, text) if members_needed else None
            if worker.is_cancelled:
                return None, members
            return find_text(ids, dec, text, start, forward=forward, chunk=65536, progress=progress), members

        span, members = await asyncio.to_thread(scan)
        if not worker.is_cancelled:
            self.post_message(TokenSearchDone(query, span, members))

    @work(exclusive=True, group="tokens-hint", exit_on_error=False, description="token inspector: _locate_hint")
    async def _locate_hint(self, data: CaptureData, decoder: TokenDecoder) -> None:
        """Find the hint's span from its text (pieces of a remote decoder fetched first),
        then decode what the panel shows: the span, and the first difference beyond it."""
        prompt = data.ids[: data.hint_prompt_len or 0]
        if decoder.source == DecodeSource.SERVER:
            await decoder.fetch(set(prompt))
            self.post_message(PiecesFetched(0))
        try:
            span = await asyncio.to_thread(locate_hint, self.case, data, decoder)
        except Exception as exc:  # noqa: BLE001 - a broken case only loses the span
            span = HintSpan(None, None, "none", f"hint span unknown: {type(exc).__name__}: {exc}")
        if span is None:
            return
        if span.found:
            a, b = span.range  # type: ignore[misc]  # a found span has a range
            span.texts["hint"] = await decoder.decode_span_async(prompt[a:b][:4096])
        if span.difference is not None:
            d = span.difference
            span.texts["prompt"] = await decoder.decode_span_async(list(d.prompt_ids))
            span.texts["reference"] = await decoder.decode_span_async(list(d.ref_ids))
        self.post_message(HintLocated(data.key, span))

    @work(thread=True, exclusive=True, group="tokens-image", exit_on_error=False, description="token inspector: _load_image")
    def _load_image(self, key: str, index: int, path: str) -> None:
        image, info = load_preview_image(path)
        self.post_message(ImageReady(key, index, image, info))

    # ------------------------------------------------------------------ flow
    def _open(self, key: str) -> None:
        self.remove_class("-picking")
        self.loaded_key = None
        self.data = None
        self._images.clear()
        self._spans.clear()
        self.hint = None
        self._hint_pending = False
        self._preview_index = None
        self._status(f"loading {key}…")
        self._load_capture(key)

    def _maybe_show(self) -> None:
        if self.data is not None and self.decoder is not None and self.loaded_key != self.data.key:
            self.loaded_key = self.data.key
            self._build_layout(self.data, self.decoder)

    def on_decoder_ready(self, message: DecoderReady) -> None:
        if self.decoder is not None and self.decoder.source == message.decoder.source == DecodeSource.TOKENIZER:
            return  # the cached tokenizer arrived with the capture already
        self.decoder = message.decoder
        self._set_header()
        if not self._show_prebuilt():
            self._maybe_show()

    def _show_prebuilt(self) -> bool:
        """Show the layout the load worker built before the decoder was known, when the
        decoder's image-pad ids are the ones it was built with."""
        pre = self._prebuilt
        self._prebuilt = None
        if pre is None or self.data is None or pre.data is not self.data or self.decoder is None:
            return False
        dec_vision = self.decoder.vision
        if dec_vision is not None and (pre.vision is None or dec_vision.pad_ids != pre.vision.pad_ids):
            return False
        self.loaded_key = self.data.key
        self.on_layout_ready(LayoutReady(pre.data, pre.cells, dec_vision or pre.vision))
        return True

    def on_captures_listed(self, message: CapturesListed) -> None:
        self.refs = message.refs
        picker = self.query_one("#tokens-picker", OptionList)
        picker.clear_options()
        if message.error:
            self._status(message.error)
        if not message.refs:
            picker.add_option(Option(Content("This case has no token captures."), id="__none__", disabled=True))
        group = None
        for ref in message.refs:
            if ref.group != group:
                group = ref.group
                picker.add_option(Option(Content.styled(f"— {group} —", "$accent bold"), disabled=True))
            size = f"{ref.size:,} ids" if ref.size is not None else ""
            prompt = _c((safe_text(ref.label, single_line=True), ""), ("  " + size, "$foreground-muted"))
            picker.add_option(Option(prompt, id=ref.key))
        # open with a row highlighted: the capture on screen, else the first one
        keys = [o.id for o in picker.options]
        want = self.data.key if self.data is not None and self.data.key in keys else next((r.key for r in message.refs), None)
        if want is not None:
            picker.highlighted = keys.index(want)
        picker.focus()

    @on(OptionList.OptionSelected, "#tokens-picker")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        key = event.option.id
        if key and key != "__none__":
            self.source = key
            self._open(key)

    def on_capture_loaded(self, message: CaptureLoaded) -> None:
        self.data = message.data
        message.data.media_drift = media_drift(message.data, self.integrity)
        self._freeze_big_capture(message.data)
        self._status(f"{message.data.label}: {len(message.data.ids):,} ids")
        if self.decoder is None and message.decoder is not None:
            self.decoder = message.decoder
        if message.layout is not None and self.decoder is not None:
            self.loaded_key = message.data.key
            self.on_layout_ready(message.layout)
            return
        self._prebuilt = message.layout  # shown when the decoder is known
        self._maybe_show()

    def _freeze_big_capture(self, data: CaptureData) -> None:
        """Keep Python's full garbage collections off a big capture.

        A full collection walks every live container; with a 1,000,000-id capture (its id
        list, logprob and top-k rows, and the copies the trace step holds) each one takes
        several frames and lands in the middle of a page scroll. ``gc.freeze`` moves every
        object alive now into the permanent generation, which collections skip; the
        objects are still freed by reference count when dropped (only a reference cycle
        among them would wait for the unfreeze at unmount). Taken once the capture is
        loaded, and again once the flowing text is first painted (its wrapped lines).
        """
        if len(data.ids) >= GC_FREEZE_IDS:
            gc_hold.hold()
            self._gc_holds += 1

    def on_capture_failed(self, message: CaptureFailed) -> None:
        if message.key == self._initial_source and self.data is None:
            # opened on e.g. a step without a capture: offer every capture instead
            self._initial_source = None
            self.action_pick()
            self._status(f"{message.key}: {message.message} — pick a capture")
            return
        self._status(f"cannot open {message.key}: {message.message}")
        self.query_one("#panel-checks", Static).update(
            _c(("✗ ", "$error bold"), (safe_text(f"cannot open {message.key}: {message.message}"), "$error"))
        )
        self.notify(safe_text(message.message, single_line=True, limit=200), title="Token capture", severity="error", markup=False)

    def on_layout_ready(self, message: LayoutReady) -> None:
        if message.target == "pair":
            if self.decoder is not None and self.has_class("-paired"):
                pair = self.query_one("#token-pair", TokenView)
                pair.mode = self.query_one("#token-view", TokenView).mode
                pair.load(message.data, self.decoder, message.cells, vision=message.vision)
                self.call_after_refresh(self._sync_pair)  # once the pane has its size
            return
        if self.data is None or message.data is not self.data or self.decoder is None:
            return
        self.remove_class("-paired")
        self.vision = message.vision
        view = self.query_one("#token-view", TokenView)
        view.load(message.data, self.decoder, message.cells, vision=message.vision)
        view.focus()
        # the tokens are painted first; the header and side panels follow after that frame
        self.call_after_refresh(self._render_panels, message.data)

    def _render_panels(self, data: CaptureData) -> None:
        if self.data is not data:
            return
        self._set_header()
        self._render_checks()
        self._render_diff()
        self._render_alignment()
        self._render_media()
        if self.data.hinted_prompt and self.decoder is not None:
            self._hint_pending = True
            self._locate_hint(self.data, self.decoder)
        else:
            self._request_spans()
        if self.data.media_report is not None and self.data.media_report.images:
            self._show_image(0)

    def on_pieces_fetched(self, message: PiecesFetched) -> None:
        for view in self.query(TokenView):
            view.pieces_updated()
        self._render_selected()
        self._render_alignment()

    def on_hint_located(self, message: HintLocated) -> None:
        if self.data is None or message.key != self.data.key:
            return
        self.hint = message.span
        self._hint_pending = False
        self.query_one("#token-view", TokenView).set_highlight(message.span.range)
        self._render_diff()

    def on_token_search_progress(self, message: TokenSearchProgress) -> None:
        view = self.query_one("#token-view", TokenView)
        if message.query != view.search_query or not message.total:
            return
        pct = 100 * message.done // message.total
        self._status(f"{message.what} for {message.query!r}: {message.done:,} of {message.total:,} ids ({pct}%)…")

    def on_token_search_done(self, message: TokenSearchDone) -> None:
        self.query_one("#token-view", TokenView).show_text_match(message.query, message.span, message.members)

    @on(TokenView.TextSearchRequested, "#token-view")
    def _text_search(self, event: TokenView.TextSearchRequested) -> None:
        view = event.view
        if view.data is None:
            return
        self._status(f"searching for {event.query!r}…")
        self._search_text(event.query, event.text, view.data.ids, event.start, event.forward, view._match_ids is None)

    @on(TokenView.OverlayToggled, "#token-view")
    def _overlay_toggled(self, event: TokenView.OverlayToggled) -> None:
        data = self.data
        if data is None:
            return
        if data.logprobs is None:
            self._status(self._no_logprobs_reason())
        else:
            self._status("logprob colours " + ("on" if event.on else "off"))

    @on(TokenView.ModeChanged, "#token-view")
    def _mode_changed(self, event: TokenView.ModeChanged) -> None:
        pair = self.query_one("#token-pair", TokenView)
        if pair.mode != event.mode:
            pair.mode = event.mode
        self._status("flowing text (f: one cell per token)" if event.mode == "flow" else "token grid (f: flowing text)")
        if event.mode == "flow" and self.data is not None and not self._flow_frozen:
            self._flow_frozen = True
            data = self.data
            self.call_after_refresh(lambda: self._freeze_big_capture(data))

    def on_span_decoded(self, message: SpanDecoded) -> None:
        if self.data is None or message.key != self.data.key:
            return
        self._spans[message.which] = message.text
        self._render_diff()

    def on_image_ready(self, message: ImageReady) -> None:
        if self.data is None or message.key != self.data.key:
            return
        self._images[message.index] = (message.image, message.info)
        if self._preview_index == message.index:
            self._render_preview(message.index)

    @on(TokenView.PiecesNeeded)
    def _pieces_needed(self, event: TokenView.PiecesNeeded) -> None:
        self._pending_pieces.update(event.ids)
        if not self._fetching:
            self._fetching = True
            self._fetch_loop()

    @on(TokenView.CursorMoved, "#token-view")
    def _cursor_moved(self, event: TokenView.CursorMoved) -> None:
        # the token view paints first; the side panel follows after that frame, once for
        # any number of moves in between (paging must not wait for the panel's layout)
        if not self._selected_pending:
            self._selected_pending = True
            self.call_after_refresh(self._render_selected_now)
        view = self.query_one("#token-view", TokenView)
        if view.cells is not None:
            run = view.cells.run_at(event.offset)
            if run is not None and run.kind == "image":
                self._show_image(run.number - 1)

    @on(TokenView.SearchResult)
    def _search_result(self, event: TokenView.SearchResult) -> None:
        self._status(safe_text(event.message, single_line=True))

    # ------------------------------------------------------------------ actions
    def action_back(self) -> None:
        prompt = self.query_one("#tokens-prompt", Input)
        if prompt.has_class("-open"):
            prompt.remove_class("-open")
            self.query_one("#token-view", TokenView).focus()
            return
        if self.has_class("-picking") and self.data is not None:
            self.remove_class("-picking")
            self.query_one("#token-view", TokenView).focus()
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_pick(self) -> None:
        self.add_class("-picking")
        self._list_captures()

    def action_open_prompt(self, mode: str) -> None:
        if self.data is None:
            return
        self._prompt_mode = mode
        prompt = self.query_one("#tokens-prompt", Input)
        prompt.placeholder = (
            "search: an id (#151655 or 151655) or text, Enter = next match" if mode == "search" else "go to id offset (e.g. 500000)"
        )
        prompt.value = ""
        prompt.add_class("-open")
        prompt.focus()

    @on(Input.Submitted, "#tokens-prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        value = event.value
        prompt = self.query_one("#tokens-prompt", Input)
        prompt.remove_class("-open")
        view = self.query_one("#token-view", TokenView)
        view.focus()
        if self._prompt_mode == "jump":
            self.jump_to(value)
        else:
            self.search(value)

    def jump_to(self, value: str) -> bool:
        view = self.query_one("#token-view", TokenView)
        off = _parse_offset(value)
        if off is None or not view.jump_to_offset(off):
            n = len(self.data.ids) if self.data else 0
            self._status(f"offset must be a number from 0 to {max(0, n - 1):,}")
            return False
        self._status(f"at offset {off:,}")
        return True

    def search(self, value: str, *, forward: bool = True) -> None:
        """Search by id (answered at once) or by text (a worker scans the whole capture)."""
        if not value.strip():
            return
        self.query_one("#token-view", TokenView).find(value, forward=forward)

    def action_jump_highlight(self) -> None:
        data = self.data
        view = self.query_one("#token-view", TokenView)
        if data is not None and data.hinted_prompt:
            # the located hint span: the same answer the side panel shows
            if self._hint_pending or self.hint is None:
                self._status("locating the hint span…")
                return
            if self.hint.range is not None:
                view.jump_to_offset(self.hint.range[0], screen_row=2)
            self._status(self.hint.message)
            return
        if data is not None and data.highlight is not None:
            start, end = data.highlight
            if end > start:
                view.jump_to_offset(start, screen_row=2)
                self._status(f"replaced span: ids {start:,}–{end - 1:,}")
                return
        self._status("no inserted span in this capture")

    def _pair_capture(self) -> CaptureData | None:
        """The counterpart shown side by side: student <-> teacher prompt, teacher <-> source completion."""
        data = self.data
        if data is None:
            return None
        if data.prompt_diff is not None and data.student_ids is not None and data.teacher_ids is not None:
            d = data.prompt_diff
            if data.key.endswith(":teacher_prompt_ids"):
                a, b = d.removed
                return CaptureData(key=data.key + "#pair", label="student prompt (unhinted)", kind="prompt",
                                   ids=data.student_ids, highlight=(a, b) if b > a else None)
            if data.key.endswith(":student_prompt_ids"):
                return CaptureData(key=data.key + "#pair", label="teacher prompt (hinted)", kind="prompt",
                                   ids=data.teacher_ids, highlight=d.inserted)
        if data.source_completion_ids is not None:
            return CaptureData(key=data.key + "#pair", label="source step completion", kind="completion",
                               ids=data.source_completion_ids, completion_start=0)
        return None

    def action_toggle_pair(self) -> None:
        if self.has_class("-paired"):
            self.remove_class("-paired")
            self.query_one("#token-view", TokenView).focus()
            return
        pair = self._pair_capture()
        if pair is None:
            self._status("nothing to show side by side for this capture")
            return
        self.add_class("-paired")
        left = safe_text(self.data.label if self.data else "", single_line=True)
        self.query_one("#pair-title", Static).update(
            _c(("left: ", "$foreground-muted"), (left, "$accent"), ("   right: ", "$foreground-muted"), (pair.label, "$accent"))
        )
        self._build_pair_layout(pair, self.vision)

    PAIR_ROW = 2  # both panes show the aligned token this many rows below their top

    def _sync_pair(self) -> None:
        """Both panes on the end of the common prefix (the first differing token), on the
        same screen row; for completions, on the first differing alignment op."""
        data = self.data
        main = self.query_one("#token-view", TokenView)
        pair = self.query_one("#token-pair", TokenView)
        if data is None or pair.data is None or not pair.data.ids or not data.ids:
            return
        if data.prompt_diff is not None:
            at = data.prompt_diff.prefix
            main.jump_to_offset(min(at, len(data.ids) - 1), screen_row=self.PAIR_ROW)
            pair.jump_to_offset(min(at, len(pair.data.ids) - 1), screen_row=self.PAIR_ROW)
        elif data.alignment:
            first = next((op for op in data.alignment if op.tag != "equal"), None)
            if first is not None:
                main.jump_to_offset(min(first.b_start, len(data.ids) - 1), screen_row=self.PAIR_ROW)
                pair.jump_to_offset(min(first.a_start, len(pair.data.ids) - 1), screen_row=self.PAIR_ROW)

    def action_next_image(self) -> None:
        view = self.query_one("#token-view", TokenView)
        if view.cells is None or not view.cells.runs:
            self._status("no image-pad runs in this capture")
            return
        here = view.cursor_offset
        runs = view.cells.runs
        nxt = next((r for r in runs if r.start > here), runs[0])
        view.jump_to_offset(nxt.start)

    # ------------------------------------------------------------------ rendering
    def _status(self, text: str) -> None:
        try:
            self.query_one("#tokens-status", Static).update(Content(safe_text(text, single_line=True)))
        except NoMatches:  # the screen is closing: no status line left to update
            pass

    def _set_header(self) -> None:
        parts: list[Any] = [("Token inspector", "bold")]
        if self.data is not None:
            parts += ["  ", (safe_text(self.data.label, single_line=True), "$accent")]
            parts += [("  " + f"{len(self.data.ids):,} ids", "$foreground-muted")]
        dec = self.decoder
        if dec is None:
            parts += ["\n", ("decoding: resolving…", "$foreground-muted")]
        else:
            colour = {"tokenizer": "$success", "server": "$warning", "raw": "$error"}[dec.source.value]
            parts += ["\n", ("decoded by: ", "$foreground-muted"), (safe_text(dec.label, single_line=True), colour)]
            if dec.notes:
                parts += [("  (" + safe_text("; ".join(dec.notes), single_line=True, limit=160) + ")", "$foreground-muted")]
        if self.vision is not None:
            fam = self.vision.family or "custom"
            parts += ["\n", ("vision ids: ", "$foreground-muted"), (f"{fam} ", ""),
                      (f"(image_pad {self.vision.image_pad}; {safe_text(self.vision.basis, single_line=True)})", "$foreground-muted")]
        self.query_one("#tokens-header", Static).update(_c(*parts))

    def _piece_for(self, tid: int) -> str:
        view = self.query_one("#token-view", TokenView)
        name = view.token_label(tid)
        if name is not None:
            return name
        dec = self.decoder
        piece = dec.piece(tid) if dec is not None else None
        if piece is None:
            self._pending_pieces.add(tid)
            if not self._fetching:
                self._fetching = True
                self._fetch_loop()
            return f"#{tid} (fetching…)"
        return piece

    def _render_selected_now(self) -> None:
        self._selected_pending = False
        self._render_selected()

    def _render_selected(self) -> None:
        view = self.query_one("#token-view", TokenView)
        data = self.data
        panel = self.query_one("#panel-selected", Static)
        if data is None or view.cells is None or view.cells.n_cells == 0:
            panel.update("")
            return
        offset, length, run = view.cells.cell(view.cursor)
        rows: list[Content] = [Content.styled("Selected token", "bold $accent")]
        if run is not None:
            rows += self._run_rows(view, data, run, offset, length)
        else:
            rows += self._token_rows(view, data, offset)
        _update_in_place(panel, _lines(*rows))

    def _run_rows(self, view: TokenView, data: CaptureData, run: Any, offset: int, length: int) -> list[Content]:
        """The selected-token panel for an image-pad run: its ids and what the grid expects."""
        rows = [
            _c(("image-pad run  ", "$foreground-muted"), (run_label(run, view.token_label(run.pad_id)), "$secondary bold")),
            _c(("ids ", "$foreground-muted"), f"{offset:,}–{offset + length - 1:,}", ("  pad id ", "$foreground-muted"), str(run.pad_id)),
        ]
        rep = data.media_report
        if rep is None or run.kind != "image":
            return rows
        k = run.number - 1
        if k >= len(rep.images):
            rows.append(Content.styled(f"psd_media lists only {len(rep.images)} image(s)", "$error bold"))
            return rows
        img = rep.images[k]
        if img.expected_run_length is not None:
            ok = img.expected_run_length == length
            rows.append(_c(("grid says ", "$foreground-muted"), f"{img.expected_run_length}", (" ✓" if ok else " ✗ mismatch", "$success" if ok else "$error bold")))
        elif img.estimated_run_length is not None:
            rows.append(_c(("estimated from image size: ", "$foreground-muted"), f"~{img.estimated_run_length}"))
        return rows

    def _token_rows(self, view: TokenView, data: CaptureData, offset: int) -> list[Content]:
        """The selected-token panel for one token: id, piece or special name, logprob, top-k."""
        tid = data.ids[offset]
        name = view.token_label(tid)
        kind = "prompt" if data.completion_start is None or offset < data.completion_start else "completion"
        if data.kind == "completion":
            kind = "completion"
        rows = [_c(("offset ", "$foreground-muted"), f"{offset:,}", ("  id ", "$foreground-muted"), (str(tid), "bold"), ("  " + kind, "$foreground-muted"))]
        if name is not None:
            sp = self.decoder.specials.get(tid) if self.decoder else None
            flag = "special" if sp is None or sp.special else "added (special: false)"
            rows.append(_c(("special token ", "$foreground-muted"), (name, "$warning bold"), (f"  {flag}", "$foreground-muted")))
        else:
            piece = self._piece_for(tid)
            rows.append(_c(("piece ", "$foreground-muted"), (repr(piece)[1:-1] if piece else "", "bold"), ("  shown as ", "$foreground-muted"), display_piece(piece)))
        ci = data.completion_index(offset)
        if ci is not None and data.logprobs is not None:
            rows.append(_logprob_row(data.logprob_at(offset), ci))
        top = data.topk_at(offset)
        if top:
            rows += self._topk_rows(data, top, tid)
        elif ci is not None and data.topk is None:
            rows.append(Content.styled(self._no_logprobs_reason() if data.logprobs is None else self._no_topk_reason(), "$foreground-muted"))
        return rows

    def _topk_rows(self, data: CaptureData, top: list[Any], tid: int) -> list[Content]:
        rows = [_c(("top-", "$foreground-muted"), (str(data.topk_k or len(top)), "$foreground-muted"), (" alternatives — " + data.topk_semantics, "$foreground-muted"))]
        for e in top[:10]:
            mark = "▶ " if e.token_id == tid else "  "
            p = e.probability if e.probability is not None else prob_of(e.logprob)
            ptxt = f"{p:7.4f}" if p is not None else "      ?"
            tok = self._piece_for(e.token_id) if e.token_id is not None else safe_text(e.token or "?", single_line=True)
            rows.append(_c((mark, "$accent"), (ptxt, ""), "  ", (str(e.token_id if e.token_id is not None else "?").rjust(7), "$foreground-muted"), "  ", display_piece(safe_text(tok, single_line=True, limit=40))))
        return rows

    def _no_logprobs_reason(self) -> str:
        data = self.data
        if data is None or data.completion_start is None:
            return "no completion in this capture: nothing to colour by logprob"
        if data.logprobs_requested is False:
            return "no logprobs or top-k: the request did not ask for logprobs"
        if data.logprobs_requested is True:
            return "no logprobs or top-k: they were requested, but the server returned none"
        return "no logprobs or top-k in this capture"

    def _no_topk_reason(self) -> str:
        data = self.data
        if data is not None and data.logprobs_requested is True:
            return "no top-k captured: logprobs were requested without top_logprobs alternatives"
        return "no top-k captured in this capture"

    def _render_checks(self) -> None:
        data = self.data
        panel = self.query_one("#panel-checks", Static)
        if data is None:
            panel.update("")
            return
        rows: list[Content] = [Content.styled("Capture", "bold $accent")]
        status_txt = data.status or ("— (attempt id field, no capture status)" if data.kind in ("prompt", "completion") else "not recorded")
        rows.append(_c(("status ", "$foreground-muted"), (safe_text(status_txt, single_line=True), "bold"),
                       ("  missing: ", "$foreground-muted"), (safe_text(", ".join(data.missing) or "none", single_line=True), "$error" if data.missing else "")))
        if data.logprob_semantics:
            rows.append(_c(("logprob semantics ", "$foreground-muted"), safe_text(data.logprob_semantics, single_line=True)))
        if data.completion_start is not None:
            n_comp = len(data.ids) - data.completion_start
            rows.append(_c(("prompt ", "$foreground-muted"), f"{data.completion_start:,}", ("  completion ", "$foreground-muted"), f"{n_comp:,}"))
        if data.logprobs is not None:
            rows.append(_c(("logprob colours (l toggles): ", "$foreground-muted"), ("p≥0.9 ", "$success"), ("p≥0.5 ", ""),
                           ("p≥0.1 ", "$warning"), ("p<0.1", "$error bold")))
        for check in data.checks:
            mark, colour = LEVEL_MARK[check.level]
            rows.append(_c((mark + " ", colour + " bold"), (safe_text(check.message, single_line=True), colour if check.level == "fail" else "")))
        mark, colour = LEVEL_MARK["fail"]
        for code, _path, message in data.media_drift:
            rows.append(_c((mark + " ", colour + " bold"), (safe_text(f"media binding ({code}, found by the integrity check): {message}", single_line=True, limit=300), colour)))
        for note in data.notes:
            rows.append(Content.styled(safe_text(note, single_line=True), "$foreground-muted"))
        view = self.query_one("#token-view", TokenView)
        if view.cells is not None and view.cells.runs:
            imgs = [r for r in view.cells.runs if r.kind == "image"]
            rows.append(_c(("image-pad runs ", "$foreground-muted"), ", ".join(f"#{r.number}×{r.length}@{r.start:,}" for r in imgs[:8]) + (" …" if len(imgs) > 8 else "")))
        panel.update(_lines(*rows))

    def _request_spans(self) -> None:
        data = self.data
        if data is None or data.prompt_diff is None or self.decoder is None:
            return
        d = data.prompt_diff
        a, b = d.inserted
        if b > a and data.teacher_ids is not None:
            self._decode_span(data.key, "inserted", data.teacher_ids[a:b][:4096])
        a, b = d.removed
        if b > a and data.student_ids is not None:
            self._decode_span(data.key, "removed", data.student_ids[a:b][:4096])

    def _render_diff(self) -> None:
        data = self.data
        panel = self.query_one("#panel-diff", Static)
        if data is None or (data.prompt_diff is None and not data.hinted_prompt):
            panel.update("")
            return
        d = data.prompt_diff
        rows = [Content.styled("Student vs teacher prompt" if d is not None else "Hinted prompt", "bold $accent")]
        if d is not None:
            rows.append(_c(("student ", "$foreground-muted"), f"{d.student_len:,}", ("  teacher ", "$foreground-muted"), f"{d.teacher_len:,}",
                           ("  common prefix ", "$foreground-muted"), f"{d.prefix:,}", ("  suffix ", "$foreground-muted"), f"{d.suffix:,}"))
        if data.hinted_prompt:
            rows.extend(self._hint_rows())
        elif d is not None and d.identical:
            rows.append(Content.styled("identical: no hint was inserted", "$warning bold"))
        elif d is not None:
            a, b = d.inserted
            rows.append(_c(("inserted in teacher ", "$foreground-muted"), (f"ids {a:,}–{b - 1:,} ({b - a:,} tokens)" if b > a else "nothing", "$success bold")))
            text = self._spans.get("inserted")
            if b > a:
                rows.append(_c(("  “", "$foreground-muted"), (safe_text(text, limit=600) if text is not None else "decoding…", "$success"), ("”", "$foreground-muted")))
            ra, rb = d.removed
            if rb > ra:
                rows.append(_c(("replaced in student ", "$foreground-muted"), (f"ids {ra:,}–{rb - 1:,} ({rb - ra:,} tokens)", "$warning bold")))
                text = self._spans.get("removed")
                rows.append(_c(("  “", "$foreground-muted"), (safe_text(text, limit=300) if text is not None else "decoding…", "$warning"), ("”", "$foreground-muted")))
            rows.append(Content.styled("press h to jump to the span", "$foreground-muted"))
        panel.update(_lines(*rows))

    def _hint_rows(self) -> list[Content]:
        """The located hint span (:attr:`hint`): where it is, how it was found, and whether
        the prompt differs from its reference beyond the hint."""
        hint = self.hint
        if hint is None:
            return [Content.styled("locating the hint span…" if self._hint_pending else "hint span not located yet", "$foreground-muted")]
        rows: list[Content] = []
        if hint.range is not None:
            a, b = hint.range
            how = "found from the hint text" if hint.basis == "hint text" else "where the prompts differ (hint text not located)"
            rows.append(_c(("hint in teacher ", "$foreground-muted"), (f"ids {a:,}–{b - 1:,} ({b - a:,} tokens)", "$success bold"),
                           ("  " + how, "$foreground-muted" if hint.basis == "hint text" else "$warning")))
            text = hint.texts.get("hint")
            rows.append(_c(("  “", "$foreground-muted"), (safe_text(text, limit=600) if text is not None else "…", "$success"), ("”", "$foreground-muted")))
        else:
            rows.append(Content.styled(safe_text(hint.message, single_line=True), "$warning bold"))
        for note in hint.notes:
            rows.append(Content.styled(safe_text(note, single_line=True, limit=200), "$foreground-muted"))
        if hint.reference is not None:
            ref = safe_text(hint.reference, single_line=True)
            if hint.same_beyond_hint:
                rows.append(_c(("✓ ", "$success bold"), "apart from the hint, the prompt equals ", (ref, "")))
            elif hint.difference is not None:
                diff = hint.difference
                before = hint.range is not None and diff.offset < hint.range[0]
                where = "before the hint" if before else "after the hint"
                rows.append(_c(("✗ ", "$error bold"), ("differs from ", "$error"), (ref, "$error"), (" beyond the hint: ", "$error"),
                               (f"first difference at id {diff.offset:,} ({where}; id {diff.ref_offset:,} there)", "$error bold")))
                mine = hint.texts.get("prompt")
                theirs = hint.texts.get("reference")
                rows.append(_c(("  this prompt “", "$foreground-muted"), (display_piece(safe_text(mine or "…", single_line=True, limit=80)), "$warning"), ("”", "$foreground-muted")))
                rows.append(_c(("  reference   “", "$foreground-muted"), (display_piece(safe_text(theirs or "…", single_line=True, limit=80)), ""), ("”", "$foreground-muted")))
        if hint.range is not None:
            rows.append(Content.styled("press h to jump to the span", "$foreground-muted"))
        return rows

    def _render_alignment(self) -> None:
        data = self.data
        panel = self.query_one("#panel-align", Static)
        if data is None or data.alignment is None:
            panel.update("")
            return
        s = alignment_summary(data.alignment)
        rows = [Content.styled("Teacher completion vs source step completion", "bold $accent")]
        rows.append(_c(("source ", "$foreground-muted"), f"{len(data.source_completion_ids or []):,}", ("  teacher ", "$foreground-muted"),
                       f"{len(data.teacher_completion_ids or []):,}", ("  method ", "$foreground-muted"), safe_text(data.alignment_method or "", single_line=True)))
        rows.append(_c(("equal ", "$foreground-muted"), (f"{s['equal']:,}", "$success"), ("  replaced ", "$foreground-muted"), (f"{s['replace']:,}", "$warning"),
                       ("  only source ", "$foreground-muted"), (f"{s['delete']:,}", "$error"), ("  only teacher ", "$foreground-muted"), (f"{s['insert']:,}", "$success")))
        src = data.source_completion_ids or []
        tea = data.teacher_completion_ids or []
        shown = 0
        for op in data.alignment:
            if op.tag == "equal":
                continue
            if shown >= 6:
                rows.append(Content.styled("…", "$foreground-muted"))
                break
            shown += 1
            a_txt = "".join(self._piece_for(t) for t in src[op.a_start:op.a_end][:24])
            b_txt = "".join(self._piece_for(t) for t in tea[op.b_start:op.b_end][:24])
            rows.append(_c((f"{op.tag:7} ", "$accent"), (f"src {op.a_start}:{op.a_end} ", "$foreground-muted"), (display_piece(safe_text(a_txt, limit=60)), "$error"),
                           ("  →  ", "$foreground-muted"), (f"teacher {op.b_start}:{op.b_end} ", "$foreground-muted"), (display_piece(safe_text(b_txt, limit=60)), "$success")))
        panel.update(_lines(*rows))

    def _render_media(self) -> None:
        data = self.data
        panel = self.query_one("#panel-media", Static)
        problems_panel = self.query_one("#media-problems", Static)
        preview = self.query_one(ImagePreview)
        if data is None or (data.media is None and not data.media_problems):
            note = (data.media_note if data is not None else None) or "none recorded for this capture"
            panel.update(_c(("Media binding ", "bold $accent"), (safe_text(note, single_line=True), "$foreground-muted")) if data and data.key.startswith("attempt") else "")
            problems_panel.update("")
            preview.clear()
            return
        rows = [Content.styled("Media binding (psd_media)", "bold $accent")]
        media = data.media
        rep = data.media_report
        if media is not None:
            rows.append(_c(("schema ", "$foreground-muted"), safe_text(media.schema_version, single_line=True)))
            rows.append(_c(("processor ", "$foreground-muted"), safe_text(media.processor_id or "not recorded", single_line=True, limit=80)))
            merge_txt = str(media.effective_merge_size) + ("" if media.merge_size_known else " (assumed)")
            rows.append(_c(("merge size ", "$foreground-muted"), merge_txt))
        if rep is not None:
            rows.append(_c(("image pad id ", "$foreground-muted"), str(rep.pad_id) if rep.pad_id is not None else "not found"))
            for img in rep.images:
                mark, colour = {"ok": ("✓ sha256 verified", "$success"), "missing": ("✗ MISSING", "$error bold"),
                                "sha_mismatch": ("✗ SHA MISMATCH", "$error bold"), "unreadable": ("✗ UNREADABLE", "$error bold")}[img.status]
                dims = f"{img.width}×{img.height} {img.format or ''}".strip() if img.width else ""
                rows.append(_c((f"image #{img.index + 1} ", "bold"), (mark, colour), ("  " + _short(img.sha256) + "…", "$foreground-muted"), ("  " + dims, "")))
                if img.grid_thw:
                    rows.append(_c(("   grid ", "$foreground-muted"), f"{list(img.grid_thw)} → {img.expected_run_length} pads"))
            s_runs = [n for _, n in rep.student_runs] if rep.student_runs is not None else None
            t_runs = [n for _, n in rep.teacher_runs] if rep.teacher_runs is not None else None
            rows.append(_c(("pad runs  student ", "$foreground-muted"), str(s_runs) if s_runs is not None else "n/a",
                           ("  teacher ", "$foreground-muted"), str(t_runs) if t_runs is not None else "n/a",
                           ("  images ", "$foreground-muted"), str(len(rep.images))))
            if rep.conditioning_equal is True:
                rows.append(Content.styled("✓ teacher and student conditioned on the same images", "$success"))
            elif rep.conditioning_equal is False:
                rows.append(Content.styled("✗ teacher and student visual conditioning DIFFERS", "$error bold"))
        elif media is not None:
            rows.append(Content.styled("no run directory known: images not verified", "$warning"))
        rows.append(_c(("preview ", "$foreground-muted"), graphics_mode()))
        panel.update(_lines(*rows))
        problems = list(data.media_problems) + (list(rep.problems) if rep is not None else [])
        if problems:
            problems_panel.update(_lines(*[_c(("✗ ", "$error bold"), (f"{p.code.value}: ", "$error bold"), safe_text(p.message, limit=300)) for p in problems]))
        else:
            problems_panel.update("")

    def _show_image(self, index: int) -> None:
        data = self.data
        if data is None or data.media_report is None or not 0 <= index < len(data.media_report.images):
            return
        self._preview_index = index
        img = data.media_report.images[index]
        if index in self._images:
            self._render_preview(index)
            return
        if img.resolved_path and img.status in ("ok", "sha_mismatch"):
            self._render_preview(index)  # caption now, picture when loaded
            self._load_image(data.key, index, img.resolved_path)
        else:
            self._render_preview(index)

    def _render_preview(self, index: int) -> None:
        data = self.data
        if data is None or data.media_report is None:
            return
        img = data.media_report.images[index]
        image, info = self._images.get(index, (None, {}))
        dims = f"{img.width}×{img.height}" if img.width else (f"{info.get('width')}×{info.get('height')}" if info.get("width") else "size unknown")
        status = {"ok": ("sha256 verified", "$success"), "missing": ("file missing — no preview", "$error bold"),
                  "sha_mismatch": ("bytes do not match the recorded sha256", "$error bold"), "unreadable": ("unreadable", "$error bold")}[img.status]
        caption = _c((f"image #{index + 1}  ", "bold"), (dims, ""), ("  sha256 ", "$foreground-muted"), (_short(img.sha256, 16) + "…", ""),
                     ("  ", ""), status)
        if info.get("error"):
            caption = caption + _c(("  (cannot decode image: " + safe_text(info["error"], single_line=True) + ")", "$warning"))
        elif img.resolved_path and image is None and img.status in ("ok", "sha_mismatch") and index not in self._images:
            caption = caption + _c(("  loading…", "$foreground-muted"))
        self.query_one(ImagePreview).set_image(image, caption)


def _profile_and_bases(case: CaptureCase | None, options: AppOptions) -> tuple[Any, list[Path]]:
    """The serving profile to resolve the decoder from, and the folders its relative paths
    are tried in."""
    bases: list[Path] = [Path(options.root)]
    profile = options.policy_profile
    if profile is not None:
        bases.insert(0, Path(profile).parent)
        return profile, bases
    # the serving profile the run bound, found by the path rules (moved trees, inputs
    # outside the root, --path-map); without one the decoder is resolved from the bases
    path = case.input_path("policy_serving_profile") if isinstance(case, CaseBundle) else None
    if path is not None and path.is_file():
        bases.insert(0, path.parent)
        return path, bases
    return None, bases


def _fallback_tokenizer_dirs(options: AppOptions) -> list[Path]:
    """``<root>/tokenizer.json`` or ``<root>/tokenizer/tokenizer.json`` of the opened folder."""
    root = Path(options.root)
    return [root, root / "tokenizer"]


def _vision_for(data: CaptureData, decoder: TokenDecoder) -> VisionIds | None:
    vision = decoder.vision
    if vision is None:
        ids = data.ids
        vision = guess_from_ids(ids if isinstance(ids, list) else list(ids))
        if vision is None and data.student_ids:
            vision = guess_from_ids(data.student_ids)
    return vision


def _answer_again(answer: CaptureLoaded | CaptureFailed) -> CaptureLoaded | CaptureFailed:
    """A fresh message with what a load answered (a message is delivered once)."""
    if isinstance(answer, CaptureLoaded):
        return CaptureLoaded(answer.data, answer.layout, answer.decoder)
    return CaptureFailed(answer.key, answer.message)


#: problems of a run's media binding: the image files it names and the image-pad runs
MEDIA_CODES = frozenset({"media_mismatch", "missing_artifact", "path_outside_root", "not_regular_file", "file_too_large"})


def media_drift(data: CaptureData, integrity: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The media-binding problems the case's integrity check found in ``data``'s run
    directory (its ``media/`` files, its attempt ledger's image-pad runs) that the capture's
    own media verification did not find itself."""
    if not data.run_dir or not integrity:
        return []
    run = os.path.normpath(data.run_dir)
    media_dir = os.path.join(run, "media") + os.sep
    ledger = os.path.join(run, "repair_attempts.jsonl")
    m = re.match(r"^attempt:\d+(?:\.(\d+))?:", data.key)
    row = f"attempt row {int(m.group(1) or 0) + 1}:" if m else None
    own = {(p.code.value, os.path.normpath(p.path)) for p in data.media_problems}
    if data.media_report is not None:
        own |= {(p.code.value, os.path.normpath(p.path)) for p in data.media_report.problems}
    out = []
    for code, path, message in integrity:
        where = os.path.normpath(path)
        about_media = where.startswith(media_dir) or (
            where == ledger and code == "media_mismatch" and row is not None and message.startswith(row))
        if about_media and code in MEDIA_CODES and (code, where) not in own:
            out.append((code, path, message))
    return out


def prepare_capture(case: CaptureCase | None, key: str, options: AppOptions, decoder: TokenDecoder | None = None) -> CaptureLoaded | CaptureFailed:
    """Capture ``key`` of ``case`` read and its cells laid out, as the token screen shows it
    first (a worker's job: file reads and parsing); or why it cannot be opened. ``decoder``:
    the screen's, when it has one; otherwise a tokenizer already parsed is used when there is
    one (file stats only), and the vision ids are guessed from the ids' framing (kept if the
    decoder's pad ids agree)."""
    try:
        data = load_capture(case, key, workdir=options.record_workdirs(case.root if case is not None else None))
    except CaptureError as exc:
        return CaptureFailed(key, str(exc))
    except Exception as exc:  # noqa: BLE001 - shown as the capture's error
        return CaptureFailed(key, f"{type(exc).__name__}: {exc}")
    if decoder is None:
        profile, bases = _profile_and_bases(case, options)
        decoder = cached_decoder(tokenizer=options.tokenizer, profile=profile, bases=bases,
                                 fallback_dirs=_fallback_tokenizer_dirs(options))
    vision = _vision_for(data, decoder if decoder is not None else RawDecoder())
    return CaptureLoaded(data, LayoutReady(data, CellLayout(data.ids, vision), vision), decoder)
