#!/usr/bin/python3
"""Issue 27: the reference list and the citation file. Every link into docs/references.md from
the user-facing text (README.md, docs/, inputs/README.md) names an entry that exists; that text
and `fluence --help` (every command's) name the papers, not "seed 000".."seed 004"; nothing
points to a DESIGN.md that the repository does not have; CITATION.cff is valid CFF 1.2.0 YAML
with the seed papers among its references.

Usage: test_references.py FLUENCE_BINARY SOURCE_DIR
"""

import glob
import os
import re
import subprocess
import unittest

import yaml

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
COMMANDS = ("train", "influence", "fldp", "whatif", "lia", "feo2-theory", "privacy", "validate")
SEED_NUMBER = re.compile(r"\b[Ss]eeds? 00[0-4]\b")


def user_documents():
    paths = [os.path.join(SOURCE, "README.md"), os.path.join(SOURCE, "inputs", "README.md")]
    paths += glob.glob(os.path.join(SOURCE, "docs", "*.md"))
    paths += glob.glob(os.path.join(SOURCE, "docs", "results", "*.md"))
    return [p for p in paths if not p.endswith("references.md")]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class References(unittest.TestCase):
    def test_every_link_names_an_entry(self):
        anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', read(
            os.path.join(SOURCE, "docs", "references.md"))))
        self.assertTrue({"fldp-fl", "carey-2023", "lia", "rokvic-2022", "feo2", "koh-liang-2017",
                         "rappor", "mironov-2017", "andrew-2021", "ditto", "mcmahan-2017",
                         "lavin-gray-2016", "pearlmutter-1994", "he-2015",
                         "glorot-bengio-2010"} <= anchors)
        linked = 0
        for path in user_documents():
            for target, anchor in re.findall(r"\]\(([^)#]*references\.md)#([^)]+)\)", read(path)):
                with self.subTest(path=os.path.relpath(path, SOURCE), anchor=anchor):
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                    self.assertEqual(resolved, os.path.join(SOURCE, "docs", "references.md"))
                    self.assertIn(anchor, anchors)
                    linked += 1
        self.assertGreater(linked, 100)  # the docs cite the papers by these links

    def test_no_seed_numbers_or_design_md_in_user_text(self):
        for path in user_documents():
            text = read(path)
            with self.subTest(path=os.path.relpath(path, SOURCE)):
                self.assertEqual(SEED_NUMBER.findall(text), [])
                self.assertNotIn("DESIGN.md", text)

    def test_help_names_the_papers(self):
        texts = [subprocess.run([FLUENCE, "--help"], capture_output=True, text=True).stdout]
        texts += [subprocess.run([FLUENCE, c, "--help"], capture_output=True, text=True).stdout
                  for c in COMMANDS]
        joined = "\n".join(texts)
        self.assertIn("docs/references.md", joined)
        self.assertIn("Carey et al. 2023", joined)
        self.assertEqual(SEED_NUMBER.findall(joined), [])

    def test_citation_file(self):
        citation = yaml.safe_load(read(os.path.join(SOURCE, "CITATION.cff")))
        self.assertEqual(citation["cff-version"], "1.2.0")
        for key in ("message", "title", "authors", "version"):
            self.assertTrue(citation.get(key), key)
        titles = [r["title"] for r in citation["references"]]
        for title in ("Achieving Flexible Local Differential Privacy", "FeO2",
                      "Evaluating the Impact of Local Differential Privacy", "LIA:"):
            self.assertTrue(any(title in t for t in titles), title)
        for reference in citation["references"]:
            self.assertIn(reference["type"], ("article", "conference-paper"))
            self.assertTrue(reference["authors"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
