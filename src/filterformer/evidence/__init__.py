"""Evidence: the papers' claims tested by comparisons, published as one Markdown document.

A claims file (:mod:`.claims`) says which comparisons (``filterformer compare`` results
directories) test which claim, and which rows get a verdict. The document (:mod:`.document`)
reads each comparison's ``results.json`` (:mod:`.comparisons`), judges every row from compare's
paired difference (:mod:`.verdicts`, :mod:`.judged_rows`), and writes per claim the paper's
figures beside ours, the setup (:mod:`.setup_text`), every method's results, and the key figure
(:mod:`.figures`). ``filterformer evidence`` is the command.
"""

from .claims import EXPECTATIONS, Claim, ClaimFigure, ClaimTest, Setting, load_claims, parse_claims
from .document import Evidence, evidence_command, render_document, write_document
from .verdicts import OUTCOMES, claim_verdict, detectable_difference

__all__ = [
    "EXPECTATIONS",
    "OUTCOMES",
    "Claim",
    "ClaimFigure",
    "ClaimTest",
    "Evidence",
    "Setting",
    "claim_verdict",
    "detectable_difference",
    "evidence_command",
    "load_claims",
    "parse_claims",
    "render_document",
    "write_document",
]
