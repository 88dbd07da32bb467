#!/usr/bin/env bash
# Issue 24's rows beside every peer at HEAD (50a45e2) on the lent H200, one shard per device
# call; `suite.sh install` only unpacks the build, after fa4_install.sh of every folder of
# bench/suite/fa4_parts.py: bash suite.sh I/N. (When it ran, this script held its own copy of
# the steps bench/suite/issue24_rows.sh now has.)
exec bash bench/suite/issue24_rows.sh h29 "${1:?install or I/N}"
