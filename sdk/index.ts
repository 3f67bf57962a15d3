/** derrick device SDK 3.0: config, messaging, IoPoints and twin properties for edge applications. */
export {
  DeviceClient,
  configStatusName,
  DEFAULT_MESSAGE_QUEUE_LIMIT,
  type MessageIterator,
  type InboundMessage,
  type RequestResult,
  type ConfigStatus,
  type DeviceClientOptions,
} from "./client.ts";
export {
  loadAppConfig,
  parseAppConfig,
  parseAppConfigText,
  SdkConfigError,
  INPUT_KINDS,
  OUTPUT_KINDS,
  RUNTIME_KEYS,
  type AppConfig,
  type InputKind,
  type OutputKind,
  type KvClientConfig,
  type SdkEnv,
} from "./config.ts";
export { ioPoint, ioPointProblems, dataReport, messageIdSequence, type IoPoint, type IoPointInput, type IoDataReport } from "./messages.ts";
export type { TwinChange, TwinValueRead, SdkLog } from "./kv/types.ts";
export { CONFIG_GROUP, twinBucket, twinKey } from "../subjects/twins.ts";
