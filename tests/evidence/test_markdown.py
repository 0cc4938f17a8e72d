from pathlib import Path

from filterformer.evidence.markdown import anchor, cell, relative_link, table


def test_tables_keep_each_cell_on_one_line_with_pipes_escaped():
    assert table(["a", "b|c"], [["x\ny", "1 | 2"]]) == [
        "| a | b\\|c |", "|---|---|", "| x y | 1 \\| 2 |"]
    assert cell("  many   spaces ") == "many spaces"


def test_anchors_are_github_s():
    assert anchor("C7: Graphs (Graph-Bridge) on B3DB") == "c7-graphs-graph-bridge-on-b3db"
    assert anchor("C1: Over-smoothing, post-LN") == "c1-over-smoothing-post-ln"


def test_links_are_relative_to_the_document(tmp_path):
    target = tmp_path / "experiments" / "results" / "c1" / "figures" / "x.png"
    assert relative_link(target, tmp_path) == "experiments/results/c1/figures/x.png"
    assert relative_link(tmp_path / "a.yaml", tmp_path / "docs") == "../a.yaml"
    assert relative_link(Path("."), Path(".")) == "."
