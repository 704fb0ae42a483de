#!/usr/bin/env bash
# Regenerates the JSON Schemas beside this script from the npm packages that README.md names.
# Run by hand when a version changes (needs node and npm); the tests only read the JSON files.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

npm init -y >/dev/null
npm install --silent --no-audit --no-fund \
    @kubernetes-models/flux-cd@3.0.1 \
    @kubernetes-models/argo-cd@2.7.2 \
    @kubernetes-models/apimachinery@2.2.0 \
    ts-json-schema-generator@2.9.0

schema() {  # schema KIND MODULE OUTPUT: the JSON Schema of the package's I<KIND> interface
    printf 'import { I%s } from "%s";\nexport type %s = I%s;\n' "$1" "$2" "$1" "$1" >"$1.d.ts"
    npx ts-json-schema-generator --path "$1.d.ts" --type "$1" \
        --no-type-check --expose none --jsDoc none --out "$1.json"
    node "$work/open-free-form.cjs" "$1.json" "$here/$3"
}

# A free-form field (x-kubernetes-preserve-unknown-fields, such as Argo CD's Helm
# `valuesObject`) is `{}` in the declarations, any object in TypeScript; the generator closes
# it, so it is opened again: no `properties` and no `additionalProperties: false`.
cat >open-free-form.cjs <<'JS'
const fs = require("node:fs");
const open = (node) => {
    if (Array.isArray(node)) return node.map(open);
    if (node === null || typeof node !== "object") return node;
    const opened = Object.fromEntries(Object.entries(node).map(([key, value]) => [key, open(value)]));
    if (opened.type === "object" && !("properties" in opened) && opened.additionalProperties === false) {
        delete opened.additionalProperties;
    }
    return opened;
};
const [source, target] = process.argv.slice(2);
fs.writeFileSync(target, JSON.stringify(open(JSON.parse(fs.readFileSync(source, "utf8"))), null, 2) + "\n");
JS

schema GitRepository @kubernetes-models/flux-cd/source.toolkit.fluxcd.io/v1/GitRepository \
    source.toolkit.fluxcd.io-v1-gitrepository.json
schema Kustomization @kubernetes-models/flux-cd/kustomize.toolkit.fluxcd.io/v1/Kustomization \
    kustomize.toolkit.fluxcd.io-v1-kustomization.json
schema Application @kubernetes-models/argo-cd/argoproj.io/v1alpha1/Application \
    argoproj.io-v1alpha1-application.json
