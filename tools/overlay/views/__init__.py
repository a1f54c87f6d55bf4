"""Reviewer and user views of the series: `status` (what each pin set carries and in which
state), `show` (one patch's review page), `rangediff` (two versions of the series side by
side through `git range-diff`) and `site` (all of it as static HTML).

They read what the repository declares (series), composed trees and recorded reports on
disk (trees, testing's path rules); range-diff composes (trees). Layer: below commands,
above the subsystems, which it never imports: a recorded drift or mutation report is read
as a file, by its documented --json fields.
"""
