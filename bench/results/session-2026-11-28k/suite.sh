#!/usr/bin/env bash
# Issue 24's forward rows at f9c3ef0 (the PV wait pinned on the max; .carry/h30) on the lent H200, as
# run: `suite.sh install` with the first FA4 folder, then `BUDGET_S=430 suite.sh 1/1` after the third.
# (When it ran, this script held its own copy of the steps bench/suite/issue24_rows.sh now has.)
exec bash bench/suite/issue24_rows.sh h30 "${1:?install or I/N}" fwd
