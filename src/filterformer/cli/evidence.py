"""Write RESULTS.md: each paper's claims beside our comparisons' results, with verdicts.

Reads a claims file (which comparisons test which claim, the paper's figures, the direction each
claim expects) and every comparison's results.json written by `filterformer compare`, and writes
one Markdown document: per claim the paper's figures beside ours, our setup, every method's mean
± std over seeds, the difference from the baseline with its 95 % interval, the verdict
(supports, contradicts, inconclusive at this scale, or not run yet), raw and after Holm's
correction within the claim, how far each method's own parameters moved, and the key figure.
The same files give the same document, byte for byte. Comparisons of a claim marked
`pending: true` that have not run yet are reported as such; for any other claim a missing
results directory is an error. A results file with a non-finite number or a malformed field is
refused, naming the file and the field; every failure exits with status 2.

Examples:
  filterformer evidence
  filterformer evidence --no-figures
  filterformer evidence --claims experiments/claims.yaml --results experiments/results \\
      --output RESULTS.md
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--claims", metavar="FILE",
                        help="the claims file (YAML; see docs/evidence.md); default: "
                             "experiments/claims.yaml")
    parser.add_argument("--results", metavar="DIR",
                        help="the directory the claims' results directories are in; default: "
                             "experiments/results")
    parser.add_argument("--output", metavar="FILE",
                        help="the Markdown file written; default: RESULTS.md")
    parser.add_argument("--no-figures", action="store_true",
                        help="write only the Markdown: do not draw the claims' trend and layer "
                             "figures (the document links them all the same)")


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast.
    from ..evidence import write_document
    from ..evidence.document import DEFAULT_OUTPUT

    paths = {"claims_path": args.claims, "results_root": args.results,
             "output_path": args.output}
    evidence = write_document(**{k: v for k, v in paths.items() if v is not None},
                              draw_figures=not args.no_figures)
    raw, adjusted = (", ".join(f"{count} {verdict}"
                               for verdict, count in evidence.counts(adjusted=holm).items())
                     for holm in (False, True))
    print(f"wrote {args.output or DEFAULT_OUTPUT}: {len(evidence.rows)} claims, "
          f"{sum(map(len, evidence.rows.values()))} test rows (raw verdicts: {raw}; after "
          f"Holm's correction within each claim: {adjusted}); "
          f"{len(evidence.figures)} figures drawn")
    return 0
