"""Which of a cell's lines are IPython configuration the checkpoint keeps (``shellconfig.merged``)."""

from __future__ import annotations

from jupyter_ckpt.shellconfig import merged


def test_one_line_is_kept_per_setting_where_it_first_ran_and_lines_that_act_are_not_kept() -> None:
    first = merged(
        [],
        "%load_ext jupyter_ckpt\n%load_ext autoreload\n%autoreload 2\n%precision 3\n"
        "%config InlineBackend.figure_format = 'retina'\nx = 1\n",
    )
    assert first == [
        "load_ext autoreload",
        "autoreload 2",
        "precision 3",
        "config InlineBackend.figure_format = 'retina'",
    ]
    again = merged(
        first,
        "%load_ext autoreload\n%autoreload 1\n%autoreload\n%autoreload now\n%precision\n%config InlineBackend\n"
        "%config InlineBackend.figure_format='svg'\n%xmode\n%pdb\n%%time\n    %xmode Plain\n%matplotlib inline\n"
        "%env A=1\n%aimport edited\n%xmode Minimal\n",
    )
    assert again == [
        "load_ext autoreload",
        "autoreload 1",
        "precision",
        "config InlineBackend.figure_format='svg'",
        "aimport edited",
        "xmode Minimal",
    ]
    assert first[1] == "autoreload 2"  # a new list: the one a checkpoint holds is never changed
