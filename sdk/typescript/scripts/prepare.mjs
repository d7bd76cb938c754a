// npm's `prepare`: builds the package (buf generate from ../../proto, then tsc).
//
// `npm install <this folder>` from another project links the folder and runs this
// script there, but installs none of the folder's own dependencies. So when they are
// missing they are installed first, from the lock file (`npm ci`; its own scripts
// skipped, this one being the only one), and one command installs and builds the SDK.
// npm hands its settings (--offline, the cache) to the nested npm through the
// environment.
import { execSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const run = (command) => execSync(command, { cwd: root, stdio: "inherit" });

if (!existsSync(new URL("../node_modules/.bin/buf", import.meta.url))) {
  run("npm ci --ignore-scripts --no-audit --no-fund");
}
run("npm run build");
