"""`overlay rebase`: move the series of a pin set onto newer upstream, as a new pin set.

    overlay rebase --pin OLD --onto plugin=REF [--onto core=pypi:vllm==X.Y.Z|core=REF] [--as NEW]
    overlay rebase --continue | --skip | --abort

1. drift classifies the series at REF (no checkout) and lists the upstream overlap;
2. patches drift shows merged upstream are dropped at NEW and recorded in series.yaml
   (`applied-upstream:` with the commit, the rule that fired and the pin sets that
   leave the patch out: DEP-3's Applied-Upstream, Yocto's Upstream-Status); those
   merged by provenance (`upstream-commit`) only where NEW pairs the plugin with a core
   it declares (its release tag or main-verified commit), else they are kept;
3. the rest are applied on REF with `git am -3` in the composed tree build/NEW/TARGET;
   a conflict stops there, in git's own resolution state, for the user to resolve
   (then --continue), drop (--skip) or give up (--abort); a patch `superseded-by`
   upstream's own version stops the rebase for a decision: port it on top (commit the
   port, --continue: a new entry only NEW carries, `only-pins`) or drop it (--skip);
4. at the end: pins/NEW.yaml is written (other targets moved along: core to a release
   archive, its sha256 from the archive's bytes), `refresh` turns the branch back into
   patches, the moved targets are composed, then `lock`, `check` and the contract gate
   run, and a summary fit for a pull request says per patch what happened and why, and
   how long each phase took.

Atomic like `apply`: nothing under pins/, patches/ or series.yaml changes before the
end, and a failure there puts back every byte it changed; the new pin file is created
exclusively. --abort removes only the composed tree the rebase made, proven by the
marker in its .git/. The in-progress state lives in .overlay/rebase.json, checked
against its exact schema on load (overlay.rebase.state); every rebase command holds the
checkout lock.

See docs/rebase.md. state (the data) -> plan (pure) -> steps (side effects); the command
is overlay.commands.rebase.

May import: the foundation, overlay.series, overlay.trees and
overlay.testing; of the other subsystems only drift's
overlay.drift.scan, overlay.drift.targets and overlay.drift.report.
"""
