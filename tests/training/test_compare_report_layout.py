"""The comparison's report.html laid out by a real browser: nothing cut at 800 pixels."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from filterformer.training.compare import compare, load_compare_config

from .helpers import majority_task

#: A headless Chromium or Chrome on the PATH (playwright's browsers are not installed here).
BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser",
                                                "google-chrome", "chrome")
                if shutil.which(name)), None)

#: Measures, after layout, every table's container and the cells of the last columns, and
#: writes them into the page for --dump-dom to return.
MEASURE = """<script>
window.addEventListener('load', () => {
  const page = document.documentElement;
  const tables = [...document.querySelectorAll('table')].map(table => {
    const box = table.parentElement;
    const edge = box.getBoundingClientRect();
    const cells = [...table.querySelectorAll('tbody td')].map(td => {
      const r = td.getBoundingClientRect();
      return {label: td.dataset.label || '', left: r.left, right: r.right, width: r.width};
    });
    return {overflowX: getComputedStyle(box).overflowX, scrollWidth: box.scrollWidth,
            clientWidth: box.clientWidth, left: edge.left, right: edge.right, cells};
  });
  const out = document.createElement('pre');
  out.id = 'layout';
  out.textContent = JSON.stringify({viewport: page.clientWidth, page: page.scrollWidth, tables});
  document.body.appendChild(out);
});
</script>"""


def _layout(report: Path, width: int, tmp_path: Path) -> dict:
    page = tmp_path / f"measured-{width}.html"
    page.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900",
         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, f"the browser returned no layout: {dom[:300]!r}"
    return json.loads(found.group(1).replace("&amp;", "&"))


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium or Chrome on the PATH")
def test_every_column_of_the_report_table_is_on_screen_at_800_pixels(tmp_path):
    methods = ["softmax", "gfsa", random.choice(["neutreno", "fusion", "gfsa+neutreno"])]
    config = load_compare_config(
        None, ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=16", "max_steps=2", "progress=false", f"output_dir={tmp_path}"],
        methods=methods, seeds=[random.randrange(100)], diagnostics_batches=1)
    compare(config, task=majority_task(), echo=lambda line: None)
    report = tmp_path / "report.html"
    layout = _layout(report, 800, tmp_path)
    assert layout["page"] <= layout["viewport"], "the page scrolls sideways"
    (table,) = layout["tables"]
    assert table["overflowX"] in ("auto", "scroll")  # wider tables scroll, never spill
    assert table["scrollWidth"] <= table["clientWidth"], "columns are hidden behind a scroll"
    over_smoothing = [c for c in table["cells"] if "cosine" in c["label"]]
    assert len(over_smoothing) == 2 * len(methods)
    for cell in table["cells"]:
        assert cell["width"] > 0 and table["left"] - 0.5 <= cell["left"]
        assert cell["right"] <= table["right"] + 0.5, cell
