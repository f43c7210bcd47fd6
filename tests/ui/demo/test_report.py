"""Exports: the one-page HTML report (self-contained, text escaped, opens offline in Chromium), PNG chart config,
presenter-sized figures and the presenter step figure."""
import dataclasses
import json
import re
import time

import plotly.utils
import pytest

import engine
from tests.browser import appdriver
from ui.demo import report
from ui.figures import fig_attention, fig_timing, theme


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "The valley and the bridge", 8, capture_attention=True, ignore_eos=True)


@pytest.fixture(scope="module")
def html(trace) -> str:
    hostile = dataclasses.replace(trace, text="<script>alert('out')</script> & **more**",
                                  prompt_text="<img src=x onerror=alert(1)>")
    return report.run_report(hostile, title="Lesson 3 <b>run</b>")


def test_report_is_one_self_contained_page(html):
    assert html.startswith("<!DOCTYPE html>") and html.count("<html") == 1
    assert html.count("Plotly.newPlot") == 2  # the phase split and the ITL chart
    assert len(re.findall(r"<script[^>]*\bsrc=", html)) == 0  # nothing fetched: Plotly's JavaScript is inline
    from plotly.offline import get_plotlyjs

    assert html.count(get_plotlyjs()[-2000:]) == 1  # inlined once, shared by both charts
    assert "Diagnosis" in html and "TTFT (prefill)" in html and "Remedies that help" in html


def test_report_shows_trace_text_as_text(html):
    assert "&lt;script&gt;alert(&#x27;out&#x27;)&lt;/script&gt; &amp; **more**" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html
    assert "Lesson 3 &lt;b&gt;run&lt;/b&gt;" in html


def test_report_opens_offline_in_chromium_and_draws_its_charts(html, tmp_path):
    sync_api = appdriver.need_browser()
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    requested = []
    with sync_api.sync_playwright() as pw:
        browser = appdriver.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route("**/*", lambda route: (requested.append(route.request.url), route.abort())
                       if not route.request.url.startswith("file:") else route.continue_())
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2",
                                   timeout=60_000)
            time.sleep(0.5)
            assert page.locator(".js-plotly-plot").count() == 2
            assert page.locator(".js-plotly-plot .bars path").count() >= 8  # bars drawn: split + one per token
            body = page.inner_text("body")  # the diagnosis's one verdict, whichever this tiny run earned
            assert any(verdict in body for verdict in ("Decode dominates", "Prefill dominates", "Close to even"))
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()
    assert requested == [] and dialogs == []  # offline, and no script from the trace ever ran


def test_export_config_names_the_png():
    config = theme.export_config("itl")
    assert config["toImageButtonOptions"] == {"format": "png", "filename": "two_bends_itl", "scale": 2}


def test_enlarged_scales_every_font_and_leaves_the_original(trace):
    fig = fig_timing.itl_figure(trace.prefill_seconds, [s.seconds for s in trace.steps])
    big = theme.enlarged(fig, 1.5)
    assert big.layout.font.size == pytest.approx(theme.FONT_SIZE * 1.5)
    assert big.layout.title.font.size == pytest.approx(theme.TITLE_SIZE * 1.5)
    assert fig.layout.font.size == theme.FONT_SIZE  # a copy
    assert len(big.data) == len(fig.data)
    dark = theme.styled(fig, theme.DARK)  # each keeps its template: the default one (white) and a named one (dark)
    for before, after in ((fig, big), (dark, theme.enlarged(dark, 1.5))):
        assert after.layout.template.to_plotly_json() == before.layout.template.to_plotly_json()
    assert big.layout.template.layout.plot_bgcolor != dark.layout.template.layout.plot_bgcolor


def test_phase_step_figure_adds_one_decode_row_per_step(trace):
    layer = trace.attention.layers[0]
    import numpy as np

    def decode_rows(step):
        z = np.array(fig_attention.phase_step_figure(trace, layer, None, step).data[1].z, dtype=float)
        return int((~np.isnan(z)).any(axis=1).sum())

    assert decode_rows(0) == 0
    assert decode_rows(1) == 1 and decode_rows(3) == 3
    assert decode_rows(99) == len(trace.steps)  # clamped to the last step
    assert "Prefill: all" in fig_attention.phase_step_figure(trace, layer, None, 0).layout.title.text


def test_token_text_in_charts_is_escaped_for_plotly(trace):
    """Plotly reads <b>, <a href> and entities in tick and hover text: a recorded token must stay plain text."""
    from ui.figures import fig_kvcache

    pieces = ["<b>", "<a href='https://x'>x</a>", "&amp;"]
    hostile = dataclasses.replace(trace, prompt_tokens=pieces + trace.prompt_tokens[3:],
                                  output_tokens=["<i>"] + trace.output_tokens[1:])
    layer = trace.attention.layers[0]
    for fig in (fig_attention.attention_heatmap(hostile, layer, None), fig_attention.attention_row_figure(hostile, 2, layer, None),
                fig_kvcache.kv_cache_figure(hostile, 2)):
        spec = json.dumps(fig.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)  # "<" kept as "<", unlike to_json
        spec = spec.replace("\\u003c", "<").replace("\\u003e", ">")
        assert "&lt;b&gt;" in spec, "the hostile token is in the figure, escaped"
        assert "<b>" not in spec and "<a href" not in spec and "<i>" not in spec


def test_the_handout_puts_several_runs_side_by_side(tiny_llama, trace):
    from plotly.offline import get_plotlyjs

    from engine.core.metrics import summarize
    from ui.text import diagnosis

    longer = engine.generate(tiny_llama, "The valley and the bridge " * 6, 12, ignore_eos=True)
    hostile = dataclasses.replace(trace, model="<b>evil</b>")
    runs = [hostile, longer, trace]
    page = report.session_report(runs, title="Lesson <3>")
    assert page.startswith("<!DOCTYPE html>") and page.count("<html") == 1
    assert page.count(get_plotlyjs()[-2000:]) == 1  # Plotly inlined once for every chart
    assert page.count("Plotly.newPlot") == 1 + len(runs)  # the runs compared, then each run's ITL chart
    assert "<b>evil</b>" not in page and "&lt;b&gt;evil&lt;/b&gt;" in page and "Lesson &lt;3&gt;" in page
    header = re.search(r'<table class="side"><tr>(.*?)</tr>', page).group(1)
    assert header.count("<th>Run ") == len(runs)
    for t in runs:  # every column's numbers and verdict come from that run's own measurement
        s = summarize(t)
        assert report._ms(s.ttft_s) in page and report._ms(s.tpot_s) in page
        assert diagnosis.diagnose(s).headline.split(":")[0] in page
    assert f"{longer.n_prompt:,} → {longer.n_output:,}" in page


def test_the_handout_needs_a_run():
    with pytest.raises(ValueError):
        report.session_report([])
