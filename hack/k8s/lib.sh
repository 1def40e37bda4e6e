# Shared by build.sh and gen-mod.sh (sourced after versions.env).

# newer_go_for GO_VERSION: exports GOTOOLCHAIN=$NEWER_GO when GO_VERSION (a go.mod go directive)
# is newer than this machine's Go; the go command then fetches that toolchain from the module proxy.
newer_go_for() {
  local have
  have=$(GOTOOLCHAIN=local go env GOVERSION)
  have=${have#go}
  if [ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | tail -1)" != "$have" ]; then
    export GOTOOLCHAIN=$NEWER_GO
  fi
}
