/**
 * Example edge application on the derrick device SDK 3.0 (runs on Bun; the SDK loads on Node through
 * a TypeScript loader such as tsx, not tested in CI, but this file starts itself only when
 * `import.meta.main` is set, which Node 20 leaves unset: there, call runEdgeApp from your own script):
 * reads IoPoints from DataIn, publishes the scaled average of two inputs to every DataOut target,
 * and follows its configuration twin (`config/<Name>`): a new AppConfig.Factor applies at once and
 * the SDK reports the applied config back.
 *
 *   bun sdk/examples/edge-app.ts sdk/examples/AEA.json
 *   curl -X PUT …/api/twin-properties/v1/acme/prod/rig-7/twin-properties \
 *     -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
 *     -d '{"group":"config","twins":[{"name":"scaler","value":"<the whole AEA.json with a new Factor>"}]}'
 */
import { DeviceClient, loadAppConfig, type AppConfig, type IoDataReport, type IoPoint } from "../index.ts";

type Settings = { factor: number; input1: string; input2: string; output: string };

function settingsOf(config: AppConfig): Settings {
  const app = (config.raw.AppConfig ?? {}) as Record<string, string>;
  return {
    factor: Number(app.Factor ?? 1),
    input1: app.Input1 ?? "Sensor1",
    input2: app.Input2 ?? "Sensor2",
    output: app.Output ?? "scaled-average",
  };
}

/** The app's computation, kept pure so it is easy to test. */
export function scaledAverage(report: IoDataReport, settings: Settings): IoPoint | undefined {
  if (!Array.isArray(report?.device)) throw new TypeError("not an IODataReport (no device list)");
  const tags = Object.assign({}, ...report.device.map((d) => d.tags)) as Record<string, IoPoint>;
  const a = tags[settings.input1]?.value;
  const b = tags[settings.input2]?.value;
  if (a === undefined || b === undefined) return undefined;
  return {
    value: ((a + b) / 2) * settings.factor,
    quality_code: 0,
    timestamp: Date.now() / 1000,
    metadata: tags[settings.input1]?.metadata ?? {},
  };
}

export async function runEdgeApp(configPath: string, print: (line: string) => void = console.log): Promise<DeviceClient> {
  const client = await DeviceClient.connect(loadAppConfig(configPath), {
    log: (level, message, data) => print(`${level} ${message} ${data ? JSON.stringify(data) : ""}`),
  });
  let settings = settingsOf(client.config);
  client.onConfig((config, status) => {
    if (status.ac === 200) settings = settingsOf(config);
    print(`config twin v${status.av}: ${status.ad} (factor ${settings.factor})`);
  });
  void (async () => {
    for await (const message of client.messages("DataIn")) {
      // One malformed input is skipped, not the end of the app.
      try {
        const point = scaledAverage(message.data as IoDataReport, settings);
        if (point) client.sendData(client.dataReport({ [settings.output]: point }));
      } catch (error) {
        print(`warn skipped a DataIn message: ${(error as Error).message}`);
      }
    }
  })();
  return client;
}

if (import.meta.main) {
  const client = await runEdgeApp(process.argv[2] ?? new URL("./AEA.json", import.meta.url).pathname);
  process.on("SIGINT", () => void client.close().then(() => process.exit(0)));
}
