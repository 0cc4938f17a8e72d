import copy
from pathlib import Path

import pytest
import yaml

from filterformer.evidence.claims import (
    CLAIM_KEYS,
    Claim,
    ClaimFigure,
    ClaimTest,
    Setting,
    load_claims,
    parse_claims,
)

EXAMPLE = Path(__file__).with_name("claims_example.yaml")


def example() -> list[dict]:
    return yaml.safe_load(EXAMPLE.read_text())


def test_the_example_file_reads_into_claims_with_defaults_filled():
    claims = load_claims(EXAMPLE)
    assert [c.id for c in claims] == ["C3", "C1", "C8"]
    c3, c1, c8 = claims
    assert c3 == Claim(
        id="C3", title="UEA JapaneseVowels", papers="AGF (IJCAI 2025) Table 1",
        claim="AGF beats a softmax Transformer on JapaneseVowels (98.7 → 99.5 % test accuracy).",
        settings=(Setting("c3_japanese_vowels", "JapaneseVowels"),),
        tests=(ClaimTest("agf", "test_accuracy", "98.7 → 99.5", "better",
                         ("c3_japanese_vowels",)),
               ClaimTest("gfsa", "last_layer_cosine_similarity", "lower", "better",
                         ("c3_japanese_vowels",))),
        setup="Validation is 20 % of the training split; the epoch is chosen on validation.",
        tuning=("c3_japanese_vowels_lr",),
        figure=ClaimFigure("file", file="figures/cosine_similarity.png"),
    )
    # A setting's label defaults to its directory; a row's settings to all of the claim's.
    assert c1.settings == (Setting("c1_depth4", "c1_depth4"), Setting("c1_depth8", "depth 8"))
    assert c1.tests[0].settings == ("c1_depth4", "c1_depth8")
    assert c1.tests[1].settings == ("c1_depth8",)
    assert c1.figure == ClaimFigure("trend", x="budget.model.depth", group="budget.model.norm",
                                    metrics=("test_accuracy", "last_layer_cosine_similarity"))
    assert c8.figure == ClaimFigure("layers")
    assert c8.tuning == () and c8.setup is None
    assert not c3.pending and not c1.pending


def test_a_claim_may_be_marked_pending():
    data = example()
    data[1]["pending"] = True
    claims = parse_claims(data)
    assert [c.pending for c in claims] == [False, True, False]


def _set(path: list, value):
    """An edit of the example: set the value at ``path`` (a sentinel ``DELETE`` removes it)."""
    def edit(data):
        target = data
        for part in path[:-1]:
            target = target[part]
        if value is DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return data
    return edit


DELETE = object()

BAD = {
    "unknown claim key": (_set([0, "figures"], {}), ["claim C3", "figures", "valid keys",
                                                     *CLAIM_KEYS]),
    "missing claim key": (_set([1, "papers"], DELETE), ["claim C1", "papers", "required"]),
    "bad id": (_set([0, "id"], "C 3"), ["'id'", "letters"]),
    "repeated id": (_set([1, "id"], "C3"), ["unique", "C3"]),
    "no settings": (_set([0, "settings"], []), ["claim C3", "settings", "non-empty list"]),
    "unknown setting key": (_set([0, "settings", 0, "name"], "x"),
                            ["claim C3, settings[0]", "name", "results, label"]),
    "results outside the root": (_set([0, "settings", 0, "results"], "../elsewhere"),
                                 ["claim C3, settings[0].results", "relative", "'..'"]),
    "absolute results": (_set([0, "tuning"], "/tmp/x"), ["claim C3.tuning", "relative"]),
    "unknown test key": (_set([0, "tests", 0, "baseline"], "softmax"),
                         ["claim C3, tests[0]", "baseline",
                          "method, metric, paper, expect, settings"]),
    "missing expect": (_set([0, "tests", 1, "expect"], DELETE),
                       ["claim C3, tests[1]", "expect", "required"]),
    "bad expect": (_set([0, "tests", 0, "expect"], "improves"),
                   ["claim C3, tests[0]", "expect", "better, worse, same", "improves"]),
    "paper as a number": (_set([0, "tests", 0, "paper"], 99.5), ["'paper'", "string", "quote"]),
    "row settings not the claim's": (_set([1, "tests", 1, "settings"], ["c1_depth16"]),
                                     ["claim C1, tests[1]", "c1_depth16", "c1_depth4, c1_depth8"]),
    "two figures": (_set([2, "figure", "file"], "x.png"),
                    ["claim C8.figure", "exactly one", "file, trend, layers"]),
    "unknown figure kind": (_set([2, "figure"], {"plot": {}}),
                            ["claim C8.figure", "plot", "file, trend, layers"]),
    "trend without metrics": (_set([1, "figure", "trend", "metrics"], DELETE),
                              ["claim C1.figure.trend", "metrics", "required"]),
    "options on layers": (_set([2, "figure", "layers"], {"depth": 12}),
                          ["claim C8.figure.layers", "depth"]),
    "title not text": (_set([0, "title"], ["a"]), ["claim C3", "'title'", "string"]),
    "pending not a bool": (_set([0, "pending"], "yes"), ["claim C3", "'pending'", "true or false"]),
    "metric compare does not compare": (
        _set([0, "tests", 0, "metric"], "test_acuracy"),
        ["claim C3, tests[0]", "'metric'", "test_acuracy", "test_accuracy", "test_perplexity",
         "last_layer_cosine_similarity", "step_time_s"]),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_claims_are_value_errors_naming_the_claim_the_key_and_the_valid_choices(case):
    edit, fragments = BAD[case]
    with pytest.raises(ValueError) as err:
        parse_claims(edit(copy.deepcopy(example())))
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


@pytest.mark.parametrize("content", ["", "claims: []", "[]", "- just text"])
def test_a_file_that_is_not_a_list_of_claims_is_refused(tmp_path, content):
    path = tmp_path / "claims.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=str(path)):
        load_claims(path)


def test_missing_and_unreadable_files_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_claims(tmp_path / "absent.yaml")
    with pytest.raises(ValueError, match=f"claims file {tmp_path} is not a file"):
        load_claims(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_claims(bad)


def test_the_documented_example_is_a_valid_claims_file():
    docs = Path(__file__).resolve().parents[2] / "docs" / "evidence.md"
    block = docs.read_text().split("```yaml\n")[1].split("```")[0]
    (claim,) = parse_claims(yaml.safe_load(block))
    assert claim.figure == ClaimFigure("file", file="figures/cosine_similarity.png")
    assert claim.tests[0].paper == "98.7 → 99.5"


def test_a_key_given_twice_in_a_claim_is_refused_naming_the_file_and_lines(tmp_path):
    claims = yaml.safe_load(Path(EXAMPLE).read_text())
    text = yaml.safe_dump(claims, sort_keys=False)
    first = text.index("\n  ", text.index("- id:")) + 1  # the first claim's second key
    line = text[first : text.index("\n", first) + 1]
    path = tmp_path / "claims.yaml"
    path.write_text(text[:first] + line + text[first:])  # that key twice in a row
    key = line.strip().split(":")[0]
    number = text[:first].count("\n") + 1
    with pytest.raises(ValueError, match=rf"claims file {path} .*key '{key}' is given twice, on "
                                         rf"line {number} and on line {number + 1}"):
        load_claims(path)
    assert yaml.safe_load(path.read_text())  # YAML itself keeps the last value without a word


def test_a_margin_and_the_paper_s_effect_are_read_and_checked():
    def claims(**row):
        return [{"id": "C", "title": "t", "papers": "p", "claim": "c",
                 "settings": [{"results": "a"}],
                 "tests": [{"method": "m", "metric": "test_accuracy", "paper": "x", **row}]}]

    test = parse_claims(claims(expect="not worse", margin=0.01, paper_effect=-0.004))[0].tests[0]
    assert (test.margin, test.paper_effect) == (0.01, -0.004)
    assert parse_claims(claims(expect="same"))[0].tests[0].margin is None
    for row, fragment in (({"expect": "same", "margin": 0}, "'margin' must be a finite number > 0"),
                          ({"expect": "same", "margin": "1 pp"}, "accuracy 0.01 is 1 pp"),
                          ({"expect": "better", "margin": 0.01}, "same or not worse"),
                          ({"expect": "better", "paper_effect": float("nan")},
                           "'paper_effect' must be a finite number")):
        with pytest.raises(ValueError, match=fragment):
            parse_claims(claims(**row))
