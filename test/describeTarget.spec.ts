// Where a Db keeps its data, as logs and `acta migrate` print it (src/db/connect.ts, describeTarget):
// never a password, whether in the user info (even one holding '@') or in a `password` parameter.
import { describeTarget } from '../src/db/connect';

test.each([
  ['postgres://app:s3cret@db.example.com/prod', 'postgres://app:***@db.example.com/prod'],
  ['postgres://app:p@ss@db.example.com/prod', 'postgres://app:***@db.example.com/prod'],
  ['postgres://db.example.com/prod?user=app&password=s3cret', 'postgres://db.example.com/prod?user=app&password=***'],
  ['postgresql://app@/prod?host=/var/run/postgresql&password=s3cret', 'postgresql://app@/prod?host=/var/run/postgresql&password=***'],
  ['postgres://app@127.0.0.1:5432/test', 'postgres://app@127.0.0.1:5432/test'],
])('%s is shown as %s', (url, shown) => {
  expect(describeTarget({ url })).toBe(shown);
  expect(describeTarget({ url })).not.toMatch(/s3cret|ss@/);
});
