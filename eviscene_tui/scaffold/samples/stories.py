"""The investigations the sample cases are made of (plain data, no I/O).

Each story is a failed source rollout of the EviScene image fact-checking agent: a
few ReAct tool calls and a wrong final judgment, plus the teacher's repaired
suffixes for the anchors the localizer may pick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Act:
    """One ReAct action: a tool call with its (JSON) result."""

    thought: str
    tool: str
    args: dict[str, Any]
    result: Any


@dataclass(frozen=True)
class Verdict:
    """The final judgment output."""

    thought: str
    verdict: str
    confidence: float
    assessment: str


@dataclass(frozen=True)
class Story:
    key: str
    claim: str
    palette: tuple[tuple[int, int, int], ...]
    acts: tuple[Act, ...]
    verdict: Verdict
    gold_verdict: str
    private_fact: str
    # anchor source_step_index -> the teacher's suffix (actions then the judgment)
    suffixes: dict[int, tuple[tuple[Act, ...], Verdict]] = field(default_factory=dict)


SYSTEM_PROMPT = "You are EviScene, an image fact-checker. Use one tool per turn; trust provenance."

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "reverse_image_search",
            "description": "Find earlier copies of the image.",
            "parameters": {"type": "object", "properties": {"image_id": {"type": "string"}}, "required": ["image_id"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch_page",
            "description": "Read a web page.",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        },
    },
]

JUDGMENT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "judgment",
        "schema": {
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["real", "fake"]},
                "confidence": {"type": "number"},
                "overall_assessment": {"type": "string"},
            },
            "required": ["verdict", "confidence", "overall_assessment"],
        },
    },
}

GENERATION_CONFIG: dict[str, Any] = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 2048, "logprobs": True, "top_logprobs": 3}


FLOOD = Story(
    key="flood",
    claim="Photo shows a street in Valencia flooded on 30 October 2024.",
    palette=((58, 96, 140), (120, 104, 82), (70, 130, 160), (34, 52, 70)),
    acts=(
        Act(
            "Look for earlier copies.",
            "reverse_image_search",
            {"image_id": "img-flood-0007"},
            {"match_count": 1, "matches": [{"url": "https://news.example.org/2019/idai-beira", "title": "Cyclone Idai floods Beira", "date": "2019-03-18"}]},
        ),
        Act(
            "Search the claimed event.",
            "web_search",
            {"query": "Valencia flood street photo October 2024"},
            {"results": [{"title": "DANA floods Valencia", "url": "https://news.example.com/valencia-dana"}]},
        ),
        Act(
            "Read the Valencia report.",
            "fetch_page",
            {"url": "https://news.example.com/valencia-dana"},
            {"title": "DANA floods Valencia", "text": "Streets in Paiporta were flooded on 29-30 October 2024."},
        ),
        Act(
            "Find the same street.",
            "web_search",
            {"query": "Paiporta flooded street cars photo"},
            {"results": []},
        ),
    ),
    verdict=Verdict("The flood is real.", "real", 0.74, "Valencia flooded then."),
    gold_verdict="fake",
    private_fact="First published 2019-03-18 by news.example.org (Beira, Mozambique).",
    suffixes={
        1: (
            (
                Act(
                    "Open the older 2019 match.",
                    "fetch_page",
                    {"url": "https://news.example.org/2019/idai-beira"},
                    {"title": "Cyclone Idai floods Beira", "text": "Photo: a flooded street in Beira, 18 March 2019."},
                ),
            ),
            Verdict("Published 2019 in Beira.", "fake", 0.91, "Beira, 2019: reused."),
        ),
        3: (
            (
                Act(
                    "Search other words.",
                    "web_search",
                    {"query": "Valencia flood photo fake"},
                    {"results": [{"title": "Viral flood photos", "url": "https://check.example.net/valencia"}]},
                ),
            ),
            Verdict("No reuse found.", "real", 0.55, "No earlier copy."),
        ),
    },
)

PROTEST = Story(
    key="protest",
    claim="Photo shows the crowd at the 12 May 2025 rally in Tbilisi.",
    palette=((180, 60, 50), (220, 200, 170), (90, 90, 110), (20, 20, 30)),
    acts=(
        Act(
            "Look for earlier copies.",
            "reverse_image_search",
            {"image_id": "img-rally-0042"},
            {"match_count": 2, "matches": [{"url": "https://photo.example.com/rally-2025", "date": "2025-05-12"}, {"url": "https://archive.example.org/2023-march", "date": "2023-03-09"}]},
        ),
        Act(
            "Open the newest match.",
            "fetch_page",
            {"url": "https://photo.example.com/rally-2025"},
            {"title": "Rally in Tbilisi", "text": "Thousands gathered on 12 May 2025."},
        ),
        Act(
            "Confirm the date.",
            "web_search",
            {"query": "Tbilisi rally 12 May 2025 crowd"},
            {"results": [{"title": "Tbilisi rally draws crowds", "url": "https://news.example.com/tbilisi"}]},
        ),
    ),
    verdict=Verdict("Date and place agree.", "real", 0.81, "Matches the rally."),
    gold_verdict="fake",
    private_fact="Taken on 2023-03-09 at the foreign-agents bill protest.",
    suffixes={
        1: (
            (
                Act(
                    "Open the 2023 copy first.",
                    "fetch_page",
                    {"url": "https://archive.example.org/2023-march"},
                    {"title": "March protests", "text": "Crowd outside parliament, 9 March 2023."},
                ),
            ),
            Verdict("It existed in 2023.", "fake", 0.88, "A 2023 photo, reused."),
        ),
        2: (
            (
                Act(
                    "Check the other match.",
                    "fetch_page",
                    {"url": "https://archive.example.org/2023-march"},
                    {"title": "March protests", "text": "Crowd outside parliament, 9 March 2023."},
                ),
            ),
            Verdict("Older copy from 2023.", "fake", 0.83, "Predates the rally."),
        ),
    },
)

STORIES = {s.key: s for s in (FLOOD, PROTEST)}
