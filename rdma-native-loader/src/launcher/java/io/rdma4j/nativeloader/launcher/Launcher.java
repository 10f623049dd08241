package io.rdma4j.nativeloader.launcher;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.net.URISyntaxException;
import java.net.URL;
import java.util.Arrays;
import java.util.Properties;
import java.util.jar.Attributes;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

/**
 * Main-Class of rdma4j's runnable jars (the doctor, the Kafka exporter). It is compiled for Java 8 so that an older
 * {@code java -jar} reaches it and says in one line which JDK the jar needs, instead of an
 * {@code UnsupportedClassVersionError} about class file versions. On Java 25 or later it runs the main class the
 * jar's manifest names in {@value #MAIN_CLASS}; {@value #NAME} names the jar in the message.
 */
public final class Launcher {

    /** Manifest attribute: the class whose {@code main} runs on a new enough Java. */
    public static final String MAIN_CLASS = "Rdma4j-Main-Class";
    /** Manifest attribute: the jar's name for the message, e.g. {@code rdma4j-doctor}. */
    public static final String NAME = "Rdma4j-Name";

    static final int REQUIRED_FEATURE = 25;
    /** Exit status when the running Java is too old. */
    static final int TOO_OLD = 1;

    private Launcher() {
    }

    public static void main(String[] args) throws Throwable {
        Attributes manifest = manifest();
        String name = manifest.getValue(NAME) != null ? manifest.getValue(NAME) : "this rdma4j jar";
        String mainClass = manifest.getValue(MAIN_CLASS);
        if (mainClass == null) {
            throw new IllegalStateException("the jar's manifest names no " + MAIN_CLASS + ": rebuild it with rdma4j's build");
        }
        if (feature(System.getProperty("java.specification.version")) < REQUIRED_FEATURE) {
            System.err.println(tooOld(name, System.getProperty("java.version"), System.getProperty("java.home")));
            System.exit(TOO_OLD);
        }
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            throw e.getCause(); // the real main's failure, as if it had been called directly
        }
    }

    /** The one line for a Java older than {@value #REQUIRED_FEATURE}. */
    static String tooOld(String name, String version, String javaHome) {
        File newer = newerJdkBeside(new File(javaHome));
        return name + " needs Java " + REQUIRED_FEATURE + " or later; this is Java " + version + " at " + javaHome
                + ". Run it with a JDK " + REQUIRED_FEATURE + " java"
                + (newer == null ? " (set JAVA_HOME or PATH to one)." : " (e.g. " + new File(newer, "bin/java") + ").");
    }

    /** 1.8 -> 8, 17 -> 17. */
    static int feature(String specificationVersion) {
        String v = specificationVersion.startsWith("1.") ? specificationVersion.substring(2) : specificationVersion;
        int dot = v.indexOf('.');
        try {
            return Integer.parseInt(dot < 0 ? v : v.substring(0, dot));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** A JDK new enough next to the running one (e.g. in /usr/lib/jvm), for the advice; null if none. */
    static File newerJdkBeside(File javaHome) {
        File[] siblings = javaHome.getParentFile() == null ? null : javaHome.getParentFile().listFiles();
        if (siblings == null) {
            return null;
        }
        Arrays.sort(siblings);
        for (File jdk : siblings) {
            if (new File(jdk, "bin/java").isFile() && feature(releaseVersion(jdk)) >= REQUIRED_FEATURE) {
                return jdk;
            }
        }
        return null;
    }

    private static String releaseVersion(File jdk) {
        Properties release = new Properties();
        try (InputStream in = new FileInputStream(new File(jdk, "release"))) {
            release.load(in);
        } catch (IOException e) {
            return "0";
        }
        return release.getProperty("JAVA_VERSION", "0").replace("\"", "");
    }

    private static Attributes manifest() throws IOException, URISyntaxException {
        URL jar = Launcher.class.getProtectionDomain().getCodeSource().getLocation();
        try (JarFile file = new JarFile(new File(jar.toURI()))) {
            Manifest manifest = file.getManifest();
            return manifest == null ? new Attributes() : manifest.getMainAttributes();
        }
    }
}
