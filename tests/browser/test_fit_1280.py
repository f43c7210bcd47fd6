"""Every chart whole on a projector: 1280x720, presenter mode, a recorded run (replay mode, no model).

The story pages are opened in a real browser; each page's main chart must lie inside the viewport, and no two
text elements Plotly drew in any chart (titles, axis titles, ticks, legend, annotations, bar and marker texts)
may overlap or stick out of their chart. The labs measure live (not in replay mode), so their figure builders
are drawn with plotly.js from made-up results of realistic size and get the same check.
"""
import time

import pytest

from tests import ROOT
from tests.browser import shared

VIEW = {"width": 1280, "height": 720}
TRACE = "long-prompt-short-answer"
SHOTS = ROOT / "artifacts" / "screenshots"
# the page's main chart(s), by the key given to presenter.chart (Streamlit puts it in a st-key-<key> class)
MAIN = {"home": ["home_split"], "prefill": ["prefill_step"], "decode": ["decode_kv", "decode_row"],
        "timing": ["timing_itl", "timing_cumulative"]}

# For one chart element: its box and the visible text boxes inside, with what they are.
TEXTS_JS = """
(chart) => {
  const box = (r) => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom});
  const out = [];
  for (const t of chart.querySelectorAll('.main-svg text')) {
    const s = (t.textContent || '').trim();
    const r = t.getBoundingClientRect();
    if (!s || r.width < 1 || r.height < 1) continue;
    const hidden = (el) => { for (; el && el !== chart; el = el.parentElement) {
        const cs = getComputedStyle(el);
        if (cs.display === 'none' || cs.visibility === 'hidden' || cs.opacity === '0') return true; } return false; };
    if (hidden(t)) continue;
    const g = t.parentElement;
    const tick = g && /(^|\\s)[xy]\\d*tick(\\s|$)/.test(g.getAttribute('class') || '');
    // a trace's texts are clipped to their subplot's plot area unless the trace says cliponaxis=false
    let clip = null;
    const sub = t.closest('.cartesianlayer [clip-path]') && t.closest('g.subplot');
    if (sub) {
      const id = [...sub.classList].find(c => c !== 'subplot');
      const drag = chart.querySelector('.draglayer .' + id + ' .nsewdrag');
      if (drag) clip = box(drag.getBoundingClientRect());
    }
    out.push({text: s, tick: tick, clip: clip, ...box(r)});
  }
  return {box: box(chart.getBoundingClientRect()), texts: out};
}
"""


def overlaps(texts: list[dict], slack: float = 1.5) -> list[tuple[str, str]]:
    """Pairs of text boxes that intersect by more than `slack` px both ways (tick labels among themselves excepted:
    rotated labels have overlapping axis-aligned boxes, and Plotly spaces its own ticks)."""
    pairs = []
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if a["tick"] and b["tick"]:
                continue
            dx = min(a["right"], b["right"]) - max(a["left"], b["left"])
            dy = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
            if dx > slack and dy > slack:
                pairs.append((a["text"], b["text"]))
    return pairs


def outside(texts: list[dict], box: dict, slack: float = 1.5) -> list[str]:
    """Texts that stick out of their chart, or of the plot area that clips them (cut off on screen)."""
    def out(t: dict, b: dict) -> bool:
        return (t["left"] < b["left"] - slack or t["right"] > b["right"] + slack
                or t["top"] < b["top"] - slack or t["bottom"] > b["bottom"] + slack)
    return [t["text"] for t in texts if out(t, box) or (t["clip"] is not None and out(t, t["clip"]))]


def settled(page, selector: str) -> list[dict]:
    """The charts' boxes and texts once two looks a second apart agree (Plotly redraws after its automargin)."""
    last = None
    for _ in range(20):
        charts = page.locator(selector)
        now = [charts.nth(i).evaluate(TEXTS_JS) for i in range(charts.count())]
        if now and now == last:
            return now
        last = now
        time.sleep(1.0)
    return last or []


def check_charts(charts: list[dict], where: str) -> list[str]:
    problems = []
    for n, chart in enumerate(charts):
        if pairs := overlaps(chart["texts"]):
            problems.append(f"{where} chart {n}: overlapping texts {pairs}")
        if out := outside(chart["texts"], chart["box"]):
            problems.append(f"{where} chart {n}: texts cut off at the chart's edge {out}")
    return problems


@pytest.fixture
def browser():
    return shared.browser()


@pytest.fixture
def replay_url():
    return shared.dashboard(TWO_BENDS_REPLAY="1")


def test_story_pages_fit_a_projector_in_presenter_mode(browser, replay_url):
    page = browser.new_page(viewport=VIEW)
    problems = []
    try:
        for name, keys in MAIN.items():
            page.goto(f"{replay_url}/?page={name}&present=1&trace={TRACE}", timeout=120_000)
            for key in keys:
                page.locator(f".st-key-{key} .main-svg").first.wait_for(timeout=120_000)
            assert page.locator("[data-testid='stException']").count() == 0, name
            charts = settled(page, "[data-testid='stPlotlyChart']")
            problems += check_charts(charts, name)
            for key in keys:
                box = page.locator(f".st-key-{key} [data-testid='stPlotlyChart']").first.bounding_box()
                if box["y"] < 0 or box["x"] < 0 or box["y"] + box["height"] > VIEW["height"] + 1 \
                        or box["x"] + box["width"] > VIEW["width"] + 1:
                    problems.append(f"{name}: chart {key} is not inside the 1280x720 viewport: {box}")
            if SHOTS.exists():
                page.screenshot(path=str(SHOTS / f"fit-1280-{name}.png"))
    finally:
        page.close()
    assert not problems, "\n".join(problems)


def lab_figures() -> dict:
    """The labs' figures from made-up results shaped like real ones (a real SmolLM2 run's numbers)."""
    from tests.ui.figures.lab_samples import sample_figures

    return sample_figures()


@pytest.mark.parametrize("width", [1230, 600])  # a full-width chart at 1280, and one of two columns
def test_lab_figures_have_no_overlapping_or_clipped_text(browser, width, tmp_path):
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    figures = lab_figures()  # all on one page (plotly.js once): one load, one wait for the drawing to settle
    (tmp_path / "plotly.min.js").write_text(get_plotlyjs())
    divs = [pio.to_html(fig.update_layout(width=width), full_html=False, include_plotlyjs=False)
            for fig in figures.values()]
    path = tmp_path / "figures.html"
    path.write_text('<html><head><meta charset="utf-8"><script src="plotly.min.js"></script></head><body>'
                    + "".join(divs) + "</body></html>")
    page = browser.new_page(viewport=VIEW)
    problems = []
    try:
        page.goto(path.as_uri())
        page.locator(".main-svg").nth(len(figures) - 1).wait_for(timeout=30_000)
        charts = settled(page, ".js-plotly-plot")
        assert len(charts) == len(figures), f"{len(charts)} charts drawn of {len(figures)}"
        for name, chart in zip(figures, charts):
            problems += check_charts([chart], f"{name} at {width} px")
    finally:
        page.close()
    assert not problems, "\n".join(problems)
