#!/bin/sh
# Makes the secret files docker-compose.yml reads, in compose/secrets/ (or the folder named),
# each a line of random characters; a file that exists is kept, so running it again changes
# no password the database already has. The folder is the owner's alone (0700); the files are
# readable (0644) because compose mounts them as they are into containers running as other
# users (the hub 65532, PostgreSQL, Grafana, Prometheus).
set -eu
folder=${1:-"$(dirname "$0")/secrets"}
umask 077
mkdir -p "$folder"
chmod 0700 "$folder"

random() {
    LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c "$1"
}

make() {
    if [ ! -e "$folder/$1" ]; then
        printf '%s\n' "$2" >"$folder/$1"
        chmod 0644 "$folder/$1"
    fi
}

make postgres_password "$(random 40)"
make hub_db_password "$(random 40)"
make grafana_db_password "$(random 40)"
make grafana_admin_password "$(random 24)"
make token_secret "$(random 48)"
make metrics_token "$(random 48)"
make admin_token "fma_$(random 43)"
make database_url "postgresql://fleetmark:$(head -n 1 "$folder/hub_db_password")@db:5432/fleetmark"
echo "secrets in $folder"
