// Tests start throwaway servers with the same helper the certification run uses.
export { freePort, startServer } from '../../certify/pgServer.mjs';
